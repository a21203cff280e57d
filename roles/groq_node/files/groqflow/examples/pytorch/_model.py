"""The small model all the examples build."""

import torch

torch.manual_seed(0)


class SmallModel(torch.nn.Module):
    def __init__(self, input_size=10, output_size=5):
        super().__init__()
        self.fc = torch.nn.Linear(input_size, output_size)

    def forward(self, x):
        return torch.nn.functional.relu(self.fc(x))


def model_and_inputs():
    return SmallModel(), {"x": torch.rand(10)}
