import torch
from transformers import Trainer


class ContrastiveTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(**inputs)
        a = outputs.logits
        b = inputs["targets"].to(a.dtype)
        sim = a @ b.transpose(0, 1)
        sim = sim / (sim.abs().amax(dim=-1, keepdim=True) + 1e-8)
        loss = -torch.log(torch.softmax(sim, dim=-1).diagonal() + 1e-10).mean()
        return (loss, outputs) if return_outputs else loss
