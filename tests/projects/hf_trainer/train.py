from transformers import AutoModel, TrainingArguments

from trainer import ContrastiveTrainer


def main(dataset):
    args = TrainingArguments(output_dir="out", fp16=True, per_device_train_batch_size=32)
    model = AutoModel.from_pretrained("bert-base-uncased")
    trainer = ContrastiveTrainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
