"""Logistic regression on MNIST: the SambaFlow starter (the emulated testbed's own).

    python logreg.py compile --pef-name="logreg" --output-folder="pef"
    python logreg.py test --pef="pef/logreg/logreg.pef"
    python logreg.py run --pef="pef/logreg/logreg.pef"

`test` compares one step on the RDU with the same step on the CPU; `run` trains for
real on MNIST (from the node's local copy: the system is offline) and reports the
test accuracy.
"""

import argparse
import sys

import sambaflow.samba.utils as utils
import torch
import torch.nn as nn
from sambaflow import samba
from sambaflow.samba.utils.argparser import parse_app_args
from sambaflow.samba.utils.dataset import mnist
from sambaflow.samba.utils.pef_utils import get_pefmeta
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class LogReg(nn.Module):
    """Logistic regression: one linear layer and the cross-entropy loss."""

    def __init__(self, num_features: int, num_classes: int, weight_norm: bool = False) -> None:
        super().__init__()
        self.lin_layer = nn.Linear(num_features, num_classes)
        if weight_norm:
            self.lin_layer = nn.utils.weight_norm(self.lin_layer)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.lin_layer(inputs)
        loss = self.criterion(out, targets)
        return loss, out


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--lr', type=float, default=0.001, help="Learning rate for training")
    parser.add_argument('--momentum', type=float, default=0.0, help="Momentum value for training")
    parser.add_argument('--weight-decay', type=float, default=1e-4,
                        help="Weight decay for training")
    parser.add_argument('--num-features', type=int, default=784,
                        help="Number features for training")
    parser.add_argument('--num-classes', type=int, default=10, help="Number classes for training")
    parser.add_argument('--weight-norm', action="store_true", help="Enable weight normalization")
    parser.add_argument('-e', '--num-epochs', type=int, default=1,
                        help="Number epochs for training")
    parser.add_argument('-n', '--num-iterations', type=int, default=100,
                        help="Number of iterations to run the pef for")


def add_run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--data-folder', type=str, default='mnist_data',
                        help="Folder containing mnist data")
    parser.add_argument('--max-steps', type=int, default=0,
                        help="Stop each epoch after this many steps (0: the whole epoch)")


def prepare_dataloader(args: argparse.Namespace, images: torch.Tensor,
                       labels: torch.Tensor) -> DataLoader:
    """Batches of the (already transformed) training set, shuffled every epoch; with
    data parallel each instance takes its share."""
    dataset = TensorDataset(images, labels)
    sampler = None
    if args.data_parallel and samba.session.world_size > 1:
        sampler = DistributedSampler(dataset, num_replicas=samba.session.world_size,
                                     rank=samba.session.rank, shuffle=True, drop_last=True)
    return DataLoader(dataset, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler,
                      drop_last=True, num_workers=getattr(args, 'num_workers', 0))


def get_inputs(args: argparse.Namespace) -> tuple[samba.SambaTensor, samba.SambaTensor]:
    images = samba.randn(args.batch_size, args.num_features, name='image', batch_dim=0)
    images = images.bfloat16().float()
    labels = samba.randint(args.num_classes, (args.batch_size, ), name='label', batch_dim=0)
    return images, labels


def train(args: argparse.Namespace, model: nn.Module) -> None:
    train_images, train_labels = mnist.load(args.data_folder, train=True, flatten=True)
    test_images, test_labels = mnist.load(args.data_folder, train=False, flatten=True)
    hyperparam_dict = {"lr": args.lr, "momentum": args.momentum, "weight_decay": args.weight_decay}
    # Data parallel: each instance trains on its share of every epoch.
    train_loader = prepare_dataloader(args, train_images, train_labels)
    total_step = len(train_loader)
    stop = min(total_step, args.max_steps) if args.max_steps else total_step
    for epoch in range(args.num_epochs):
        if isinstance(train_loader.sampler, DistributedSampler):
            train_loader.sampler.set_epoch(epoch)
        total_loss = 0.0
        for i, (images, labels) in enumerate(train_loader):
            if i == stop:
                break
            images = samba.from_torch_tensor(images, name='image', batch_dim=0)
            labels = samba.from_torch_tensor(labels, name='label', batch_dim=0)
            loss, outputs = samba.session.run(input_tensors=[images, labels],
                                              output_tensors=model.output_tensors,
                                              hyperparam_dict=hyperparam_dict,
                                              data_parallel=args.data_parallel,
                                              reduce_on_rdu=args.reduce_on_rdu)
            loss, outputs = samba.to_torch(loss), samba.to_torch(outputs)
            total_loss += loss.item()
            if (i + 1) % 10000 == 0 and args.local_rank <= 0:
                print(f'Epoch [{epoch + 1}/{args.num_epochs}], Step [{i + 1}/{total_step}], '
                      f'Loss: {total_loss / (i + 1):.4f}')

    samba.session.to_cpu(model)
    with torch.no_grad():
        loss, outputs = model(test_images, test_labels)
        correct = (outputs.argmax(1) == test_labels).sum().item()
    if args.local_rank <= 0:
        print(f'Test Accuracy: {100.0 * correct / len(test_labels):.2f}  Loss: {loss.item():.4f}')


def test(args: argparse.Namespace, model: nn.Module, inputs: tuple[samba.SambaTensor, ...],
         outputs: tuple[samba.SambaTensor, ...]) -> None:
    # The CPU's answer first (fp32), then the RDU's, from the same weights.
    outputs_gold = model(*inputs)
    outputs_samba = samba.session.run(input_tensors=inputs, output_tensors=outputs)
    for i, (output_samba, output_gold) in enumerate(zip(outputs_samba, outputs_gold, strict=False)):
        utils.assert_close(output_samba, output_gold, f'forward output #{i}', threshold=1e-2)
    if not args.inference:
        outputs_gold[0].backward()
        for name, param in model.named_parameters():
            utils.assert_close(param.sn_grad, param.grad, f'{name}.grad', threshold=1e-2)
    print("Test passed: the RDU's results match the CPU's")


def main(argv: list[str]) -> None:
    args = parse_app_args(argv=argv, common_parser_fn=add_args, run_parser_fn=add_run_args)
    utils.set_seed(256)
    model = LogReg(args.num_features, args.num_classes, args.weight_norm)
    samba.from_torch_model_(model)
    inputs = get_inputs(args)
    optimizer = samba.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay) if not args.inference else None

    if args.command == "compile":
        samba.session.compile(model, inputs, optimizer, name='logreg', squeeze_bs_dim=True,
                              app_dir=utils.get_file_dir(__file__), config_dict=vars(args),
                              pef_metadata=get_pefmeta(args, model))
    elif args.command == "test":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        test(args, model, inputs, model.output_tensors)
    elif args.command == "run":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        train(args, model)
    elif args.command == "measure-performance":
        utils.common_app_driver(args, model, inputs, optimizer, name='logreg',
                                app_dir=utils.get_file_dir(__file__))


if __name__ == '__main__':
    main(sys.argv[1:])
