"""tfmon: TensorFlow 1's MonitoredSession and hooks for eager TensorFlow 2."""

import setuptools

setuptools.setup(
    name='tfmon',
    version='0.1.0',
    description="TensorFlow 1's tf.compat.v1.train hook API on eager TensorFlow 2",
    packages=setuptools.find_packages(include=['tfmon', 'tfmon.*']),
    python_requires='>=3.9',
    install_requires=[
        'tensorflow>=2.16',
        'tensorboard',  # tf.summary.scalar needs it; TF 2.21 no longer pulls it in
        'numpy',
        'absl-py',
    ],
    extras_require={
        # pandas: pandas_input_fn's tests; tf_keras: tf.compat.v1.layers and the
        # estimator tests that build v1 layers (the tensorflow wheel does not bring
        # it); tf-slim: real TF1 training loops run on a captured graph
        'test': ['pytest', 'pandas', 'tf_keras', 'tf-slim'],
    },
)
