"""tfmon: TensorFlow 1's MonitoredSession and hooks for eager TensorFlow 2."""

from tfmon import train
from tfmon.train import *  # pylint: disable=wildcard-import

from tfmon import keras  # tfmon.keras.HookCallback: hooks inside Keras Model.fit

__version__ = '0.1.0'
