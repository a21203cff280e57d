"""LeNet-5 on MNIST: the SambaFlow starter (the emulated testbed's own).

    srun python lenet.py compile -b=1 --pef-name="lenet" --output-folder="pef"
    srun python lenet.py run --pef="pef/lenet/lenet.pef"
    srun python lenet.py test --pef="pef/lenet/lenet.pef"

`run` trains for real on MNIST (copied from the node's local dataset: the system is
offline), printing the running loss every step, then the test accuracy. The running loss
(every 100 steps) and the test accuracy also go to TensorBoard event files in
--log-path (default: checkpoints): `tensorboard --logdir checkpoints --port 6006`.
"""

import argparse
import os
import sys

import sambaflow.samba.utils as utils
import torch
import torch.nn as nn
from sambaflow import samba
from sambaflow.samba.utils.argparser import parse_app_args
from sambaflow.samba.utils.dataset import mnist
from sambaflow.samba.utils.pef_utils import get_pefmeta
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


SUMMARY_STEPS = 100  # the running loss goes to TensorBoard every this many steps


class LeNet(nn.Module):
    """LeNet-5: two convolutions with max pooling, three fully connected layers."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=1, out_channels=6, kernel_size=5, stride=1, padding=2)
        self.maxpool1 = nn.MaxPool2d(kernel_size=2)
        self.conv2 = nn.Conv2d(in_channels=6, out_channels=16, kernel_size=5, stride=1, padding=0)
        self.maxpool2 = nn.MaxPool2d(kernel_size=2)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)
        self.relu = nn.ReLU()
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.maxpool1(self.relu(self.conv1(x)))
        x = self.maxpool2(self.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        out = self.fc3(x)
        loss = self.criterion(out, labels)
        return loss, out


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('-n', '--num-iterations', type=int, default=100,
                        help="Number of iterations to run the pef for")
    parser.add_argument('-e', '--num-epochs', type=int, default=1,
                        help="Number epochs for training")
    parser.add_argument('--log-path', type=str, default='checkpoints', help="Log path")
    parser.add_argument('--num-workers', type=int, default=0, help="Number of workers")
    parser.add_argument('--measure-train-performance', action='store_true',
                        help="Measure training performance")
    parser.add_argument('--lr', type=float, default=0.01, help="Learning rate for training")
    parser.add_argument('--momentum', type=float, default=0.0, help="Momentum value for training")
    parser.add_argument('--weight-decay', type=float, default=0.01,
                        help="Weight decay for training")
    parser.add_argument('--num-classes', type=int, default=10, help="Number of output classes")


def add_run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--data-path', type=str, default='./data', help="Data path")
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
    images = samba.randn(args.batch_size, 1, 28, 28, name='image', batch_dim=0)
    labels = samba.randint(args.num_classes, (args.batch_size, ), name='label', batch_dim=0)
    return images, labels


def train(args: argparse.Namespace, model: nn.Module) -> None:
    root = os.path.join(args.data_path, args.data_folder)
    train_images, train_labels = mnist.load(root, train=True)
    test_images, test_labels = mnist.load(root, train=False)
    hyperparam_dict = {"lr": args.lr, "momentum": args.momentum, "weight_decay": args.weight_decay}
    train_loader = prepare_dataloader(args, train_images, train_labels)
    total_step = len(train_loader)
    stop = min(total_step, args.max_steps) if args.max_steps else total_step
    writer = summary_writer(args)
    start = samba.session.device_time()
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
            total_loss += samba.to_torch(loss).item()
            if args.local_rank <= 0:
                print(f'Epoch [{epoch + 1}/{args.num_epochs}], Step [{i + 1}/{total_step}], '
                      f'Loss: {total_loss / (i + 1):.4f}')
            if writer is not None and ((i + 1) % SUMMARY_STEPS == 0 or i + 1 == stop):
                writer.add_scalar('train/loss', total_loss / (i + 1), epoch * stop + i + 1)
    seconds = samba.session.device_time() - start
    if args.measure_train_performance and args.local_rank <= 0:
        samples = args.num_epochs * stop * args.batch_size * samba.session.world_size
        print(f'Training time: {seconds:.2f} s, {samples / seconds:.2f} samples/s')

    samba.session.to_cpu(model)
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for first in range(0, len(test_images), 1000):
            images, labels = test_images[first:first + 1000], test_labels[first:first + 1000]
            loss, outputs = model(images, labels)
            total_loss += loss.item() * len(labels)
            correct += (outputs.argmax(1) == labels).sum().item()
    if args.local_rank <= 0:
        print(f'Test Accuracy: {100.0 * correct / len(test_labels):.2f} '
              f'Loss: {total_loss / len(test_labels):.4f}')
    if writer is not None:
        writer.add_scalar('test/accuracy', 100.0 * correct / len(test_labels),
                          args.num_epochs * stop)
        writer.close()


def summary_writer(args: argparse.Namespace):
    """TensorBoard's writer into --log-path (the first rank's only), or None without
    TensorBoard (the nodes have it)."""
    if args.local_rank > 0:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print(f'[WARNING] TensorBoard is not installed: no event files in {args.log_path}')
        return None
    return SummaryWriter(log_dir=args.log_path)


def test(args: argparse.Namespace, model: nn.Module, inputs: tuple[samba.SambaTensor, ...],
         outputs: tuple[samba.SambaTensor, ...]) -> None:
    # The CPU's answer first (fp32), then the RDU's (bfloat16 arithmetic), same weights.
    outputs_gold = model(*inputs)
    outputs_samba = samba.session.run(input_tensors=inputs, output_tensors=outputs)
    for i, (output_samba, output_gold) in enumerate(zip(outputs_samba, outputs_gold, strict=False)):
        utils.assert_close(output_samba, output_gold, f'forward output #{i}', threshold=2e-2)
    if not args.inference:
        outputs_gold[0].backward()
        # In bfloat16 a few activations of a random image land on the other side of a
        # ReLU or win another max-pool window, which reroutes whole rows of the gradients
        # below them: compare the gradients in norm, not element by element.
        for name, param in model.named_parameters():
            utils.assert_close(param.sn_grad, param.grad, f'{name}.grad', threshold=0.5,
                               metric='l2')
    print("Test passed: the RDU's results match the CPU's")


def main(argv: list[str]) -> None:
    args = parse_app_args(argv=argv, common_parser_fn=add_args, run_parser_fn=add_run_args)
    utils.set_seed(256)
    model = LeNet(args.num_classes)
    samba.from_torch_model_(model)
    inputs = get_inputs(args)
    optimizer = samba.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay) if not args.inference else None

    if args.command == "compile":
        samba.session.compile(model, inputs, optimizer, name='lenet', squeeze_bs_dim=True,
                              app_dir=utils.get_file_dir(__file__), config_dict=vars(args),
                              pef_metadata=get_pefmeta(args, model))
    elif args.command == "test":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        test(args, model, inputs, model.output_tensors)
    elif args.command == "run":
        utils.trace_graph(model, inputs, optimizer, pef=args.pef, mapping=args.mapping)
        train(args, model)
    elif args.command == "measure-performance":
        utils.common_app_driver(args, model, inputs, optimizer, name='lenet',
                                app_dir=utils.get_file_dir(__file__))


if __name__ == '__main__':
    main(sys.argv[1:])
