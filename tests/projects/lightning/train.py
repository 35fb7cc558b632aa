from lightning.pytorch import Trainer

from model import Classifier


def main(train_loader, val_loader):
    trainer = Trainer(accelerator="gpu", devices=1, precision="16-mixed", max_epochs=10)
    trainer.fit(Classifier(128, 10), train_loader, val_loader)


if __name__ == "__main__":
    main(None, None)
