"""Train a small Keras model on MNIST on one IPU (TensorFlow 2).

The aitestbed emulator's edition of the tutorial the ALCF guide runs with
`/opt/slurm/bin/srun --ipus=1 python mnist.py`: a Flatten, a Dense(128, relu)
and a Dense(10, softmax), trained with SGD for 4 epochs of 2,000 steps of 32
images, 100 steps per execution on the IPU.
"""

import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

if not tf.__version__.startswith("2."):
    raise ImportError("TensorFlow 2 is required for this example")

BATCH_SIZE = 32
STEPS_PER_EPOCH = 2000
STEPS_PER_EXECUTION = 100
EPOCHS = 4


def training_data():
    """MNIST's training images scaled to [0, 1], in fixed-size batches, repeated
    (the IPU needs shapes known when the program is compiled)."""
    (images, labels), _ = keras.datasets.mnist.load_data()
    images = images / 255.0
    data = tf.data.Dataset.from_tensor_slices((images, labels))
    data = data.shuffle(10000).batch(BATCH_SIZE, drop_remainder=True)
    data = data.map(lambda x, y: (tf.cast(x, tf.float32), tf.cast(y, tf.float32)))
    return data.repeat()


def model_fn():
    return keras.Sequential([
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


# One IPU, selected automatically from the job's partition.
config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = model_fn()
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(),
        optimizer=keras.optimizers.SGD(),
        steps_per_execution=STEPS_PER_EXECUTION,
    )
    model.fit(training_data(), steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS)
