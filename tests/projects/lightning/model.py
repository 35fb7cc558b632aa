import lightning.pytorch as L
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self, dim, classes):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))

    def training_step(self, batch, batch_idx):
        x, y, allowed = batch
        logits = self.head(torch.relu(self.encoder(x)))
        logits = logits.masked_fill(~allowed, -1e9)
        return F.cross_entropy(logits, y)

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        p = torch.sigmoid(self.head(torch.relu(self.encoder(x))))
        self.log("val_nll", -torch.log(p + 1e-10).mean())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)
