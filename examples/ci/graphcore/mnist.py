"""One epoch of a small convolutional network on MNIST with PopTorch, then its accuracy.

Written against PopTorch's documented API (Options, DataLoader, trainingModel,
inferenceModel). MNIST comes from torchvision's usual place, ~/.torch/datasets, where
the IPU hosts keep an offline copy (download=True finds it and downloads nothing). A
subset keeps the epoch short: tens of seconds on a CPU-emulated IPU.

    python mnist.py [--train-images 4000] [--test-images 2000] [--batch-size 32]
"""

import argparse

import poptorch
import torch
import torchvision


class Classifier(torch.nn.Module):
    """Two convolutions with max pooling, then a linear layer; returns the loss too when
    given labels (PopTorch's training model computes the loss on the IPU)."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, kernel_size=3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, kernel_size=3), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.classifier = torch.nn.Linear(16 * 5 * 5, 10)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, images, labels=None):
        logits = self.classifier(self.features(images).flatten(1))
        if labels is None:
            return logits
        return logits, self.loss(logits, labels)


def subset(train: bool, count: int, root: str) -> torch.utils.data.Dataset:
    data = torchvision.datasets.MNIST(
        root, train=train, download=True,
        transform=torchvision.transforms.Compose([
            torchvision.transforms.ToTensor(),
            torchvision.transforms.Normalize((0.1307,), (0.3081,))]))
    return torch.utils.data.Subset(data, range(min(count, len(data))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-images", type=int, default=4000)
    parser.add_argument("--test-images", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device-iterations", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--data", default="~/.torch/datasets")
    args = parser.parse_args()

    torch.manual_seed(0)
    opts = poptorch.Options().deviceIterations(args.device_iterations)
    train = poptorch.DataLoader(opts, subset(True, args.train_images, args.data),
                                batch_size=args.batch_size, shuffle=True)
    model = Classifier()
    training = poptorch.trainingModel(
        model, opts, optimizer=poptorch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9))
    model.train()
    for images, labels in train:
        _, loss = training(images, labels)
    print(f"Trained one epoch: {len(train) * train.combinedBatchSize} images, "
          f"{len(train) * args.device_iterations} steps of {args.batch_size}, "
          f"last loss {float(loss.mean()):.4f}")
    training.detachFromDevice()

    test_opts = poptorch.Options().deviceIterations(args.device_iterations)
    test = poptorch.DataLoader(test_opts, subset(False, args.test_images, args.data),
                               batch_size=args.batch_size)
    model.eval()
    inference = poptorch.inferenceModel(model, test_opts)
    correct = total = 0
    for images, labels in test:
        correct += int((inference(images).argmax(dim=1) == labels).sum())
        total += len(labels)
    inference.detachFromDevice()
    print(f"Accuracy on {total} test images: {100.0 * correct / total:.2f}%")


if __name__ == "__main__":
    main()
