"""
The following example trains BERT-tiny (2 layers, hidden size 128) on a small sentence
classification data set, builds it with GroqFlow and compares GroqChip and CPU accuracy and
latency.

Emulation notes: no model hub and no internet here, so the model is BERT-tiny's
architecture in plain PyTorch (demo_helpers.models), trained for a few seconds on the CPU on
a synthetic, deterministic data set (demo_helpers.sentiment); the trained weights are kept in
the GroqFlow cache next to the build, so `--execute` evaluates the same model.
"""

import os
import time

import torch
from demo_helpers.args import parse_args
from demo_helpers.compute_performance import Dataset, compute_performance
from demo_helpers.models import SequenceClassifier, bert_tiny_config
from demo_helpers.sentiment import encode, sentences
from groqflow import groqit

MAX_SEQ_LENGTH = 128
TRAIN_SEQ_LENGTH = 8  # the sentences fit in 8 tokens; the rest of the 128 is masked padding
TRAIN_BATCH, TRAIN_STEPS, LEARNING_RATE = 64, 24, 1e-3
NUM_TEST = int(os.environ.get("BERT_TINY_NUM_TEST", "200"))
BUILD_NAME = "bert_tiny"
WEIGHTS = "bert_tiny_trained.pt"


def _weights_file() -> str:
    """The trained weights live in the build directory, next to the build they belong to."""
    cache = os.environ.get("GROQFLOW_CACHE_DIR", os.path.expanduser("~/.cache/groqflow"))
    return os.path.join(cache, BUILD_NAME, WEIGHTS)


def trained_model() -> tuple[torch.nn.Module, bool]:
    """BERT-tiny trained on the synthetic sentences (once; then loaded from the cache).
    Returns the model and whether it was trained now."""
    torch.manual_seed(0)
    model = SequenceClassifier(bert_tiny_config())
    path = _weights_file()
    if os.path.isfile(path):
        model.load_state_dict(torch.load(path))
        return model.eval(), False
    print("Training BERT-tiny on the CPU (about 15 seconds, once).")
    start = time.perf_counter()
    ids, labels = sentences(TRAIN_BATCH * TRAIN_STEPS, seed=1, max_len=TRAIN_SEQ_LENGTH)
    x, mask = (torch.from_numpy(a) for a in encode(ids, TRAIN_SEQ_LENGTH))
    y = torch.from_numpy(labels)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    model.train()
    for step in range(TRAIN_STEPS):
        batch = slice(step * TRAIN_BATCH, (step + 1) * TRAIN_BATCH)
        loss = torch.nn.functional.cross_entropy(model(x[batch], mask[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"Trained for {TRAIN_STEPS} steps in {time.perf_counter() - start:.1f} s, "
          f"final loss {loss.item():.4f}")
    return model.eval(), True


def test_dataset() -> Dataset:
    ids, labels = sentences(NUM_TEST, seed=2, max_len=TRAIN_SEQ_LENGTH)
    x, mask = encode(ids, MAX_SEQ_LENGTH)
    samples = [{"input_ids": torch.from_numpy(x[i:i + 1]),
                "attention_mask": torch.from_numpy(mask[i:i + 1])} for i in range(len(ids))]

    def postprocess(preds):
        return torch.cat([p.reshape(1, -1) for p in preds]).argmax(dim=1).numpy()

    def accuracy(pred, y):
        return f"{100.0 * (pred == y).mean():.2f}%"

    return Dataset(samples, labels, postprocess, accuracy)


def evaluate_bert_tiny(rebuild_policy=None, should_execute=True):
    pytorch_model, trained_now = trained_model()
    dummy_inputs = {
        "input_ids": torch.ones((1, MAX_SEQ_LENGTH), dtype=torch.long),
        "attention_mask": torch.ones((1, MAX_SEQ_LENGTH), dtype=torch.long),
    }
    groq_model = groqit(pytorch_model, dummy_inputs, rebuild=rebuild_policy)
    if trained_now or not os.path.isfile(_weights_file()):  # a rebuild empties the build dir
        torch.save(pytorch_model.state_dict(), _weights_file())
    if should_execute:
        compute_performance(groq_model, pytorch_model, test_dataset(), task="classification")
    print(f"Proof point {__file__} finished!")


if __name__ == "__main__":
    evaluate_bert_tiny(**parse_args())
