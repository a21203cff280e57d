#!/usr/bin/env python3
# Written for the aitestbed emulator of the ALCF AI Testbed (not Graphcore's code).
"""Train a small convolutional network on MNIST with PopTorch, then test it.

The training model runs 50 device iterations per step (50 batches of 8 images
are sent to the IPU at once) and returns the outputs of every iteration; the
inference model is compiled separately after the training model has released
its IPU.
"""

import argparse

import poptorch
import torch
import torch.nn as nn
import torch.optim as optim
import torchvision
from tqdm import tqdm

DATASET_DIR = "~/.torch/datasets"


class Block(nn.Module):
    """Convolution, max pooling and ReLU."""

    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = Block(1, 32, 3, 2)
        self.layer2 = Block(32, 64, 3, 2)
        self.layer3 = nn.Linear(1600, 128)
        self.layer3_act = nn.ReLU()
        self.layer3_dropout = nn.Dropout(0.5)
        self.layer4 = nn.Linear(128, 10)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.layer2(self.layer1(x))
        # 28x28 -> conv 26 -> pool 13 -> conv 11 -> pool 5: 64 * 5 * 5 = 1600 features
        x = x.view(-1, 1600)
        x = self.layer3_dropout(self.layer3_act(self.layer3(x)))
        return self.softmax(self.layer4(x))


class TrainingModelWithLoss(nn.Module):
    """The network plus its loss, so that one PopTorch model does the whole training step."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, args, labels=None):
        output = self.model(args)
        if labels is None:
            return output
        loss = self.loss(output, labels)
        return output, loss


def accuracy(predictions, labels):
    """Percentage of predictions whose highest score is the label."""
    _, predicted = torch.max(predictions, 1)
    labels = labels[-predictions.size()[0]:]
    return torch.sum(torch.eq(predicted, labels)).item() / labels.size()[0] * 100.0


def parse_args():
    parser = argparse.ArgumentParser(description="MNIST training in PopTorch")
    parser.add_argument("--batch-size", type=int, default=8,
                        help="batch size for training (default: 8)")
    parser.add_argument("--device-iterations", type=int, default=50,
                        help="device iteration (default: 50)")
    parser.add_argument("--test-batch-size", type=int, default=80,
                        help="batch size for testing (default: 80)")
    parser.add_argument("--epochs", type=int, default=10,
                        help="number of epochs to train (default: 10)")
    parser.add_argument("--lr", type=float, default=0.05,
                        help="learning rate (default: 0.05)")
    return parser.parse_args()


def main():
    args = parse_args()
    batch_size = args.batch_size
    test_batch_size = args.test_batch_size
    epochs = args.epochs
    learning_rate = args.lr
    # The tutorial always uses 50 device iterations, whatever --device-iterations says.
    device_iterations = 50

    transform_mnist = torchvision.transforms.Compose([
        torchvision.transforms.ToTensor(),
        torchvision.transforms.Normalize((0.1307,), (0.3081,)),
    ])
    training_dataset = torchvision.datasets.MNIST(
        DATASET_DIR, train=True, download=True, transform=transform_mnist)
    test_dataset = torchvision.datasets.MNIST(
        DATASET_DIR, train=False, download=True, transform=transform_mnist)

    # Each step loads device_iterations batches at once.
    training_data = poptorch.DataLoader(
        options=poptorch.Options().deviceIterations(device_iterations),
        dataset=training_dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
    )
    test_opts = poptorch.Options()
    test_data = poptorch.DataLoader(
        options=test_opts,
        dataset=test_dataset,
        batch_size=test_batch_size,
        shuffle=True,
        drop_last=True,
    )

    model = Network()
    model_with_loss = TrainingModelWithLoss(model)
    optimizer = optim.SGD(model.parameters(), lr=learning_rate)

    # Return the outputs of all the device iterations, not only the last one.
    training_opts = poptorch.Options().deviceIterations(device_iterations)
    training_opts = training_opts.outputMode(poptorch.OutputMode.All)
    training_model = poptorch.trainingModel(model_with_loss, training_opts, optimizer=optimizer)

    # The first call compiles the model for the IPU.
    for _ in tqdm(range(epochs), desc="Epochs"):
        for data, labels in training_data:
            preds, losses = training_model(data, labels)

    # Free the IPU for the inference model; the trained weights come back to `model`.
    training_model.detachFromDevice()

    inference_model = poptorch.inferenceModel(model, options=test_opts)
    sum_acc = 0.0
    for data, labels in tqdm(test_data):
        output = inference_model(data)
        sum_acc += accuracy(output, labels)

    print(model_with_loss)
    print(f"Accuracy on test set: {sum_acc / len(test_data):0.2f}%")


if __name__ == "__main__":
    main()
