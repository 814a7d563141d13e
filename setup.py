from setuptools import find_packages, setup

setup(
    name="fairseq_compgen",
    version="0.1.0",
    description="A fairseq plugin: Transformer variants and benchmarks for compositional generalization",
    packages=find_packages(include=["fairseq_compgen", "fairseq_compgen.*"]),
    python_requires=">=3.10",
    # fairseq is installed as fairseq-fixed (fairseq 0.12.2 does not import on Python 3.11); torch is expected
    # to be installed first (scripts/setup.sh) so that pip does not pull a multi-GB CUDA build.
    install_requires=["fairseq-fixed==0.12.3.1", "torch>=2.0", "numpy", "sacrebleu>=2", "pyyaml",
                      "sentencepiece", "sacremoses", "subword-nmt"],
    extras_require={"plots": ["matplotlib"], "tb": ["tensorboardX"]},  # tb: fairseq-train --tensorboard-logdir
    entry_points={
        "console_scripts": [
            "compgen-score=fairseq_compgen.scoring.exact_match:main",
            "compgen-sweep=fairseq_compgen.pipelines.sweep:main",
            "compgen-aggregate=fairseq_compgen.pipelines.aggregate:main",
            "compgen-help=fairseq_compgen.help:main",
        ]
    },
)
