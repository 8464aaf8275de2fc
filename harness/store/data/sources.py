"""Where each dataset comes from: the canonical archives and the checksums their publishers give."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Archive:
    name: str  # file name, also what a mirror or --from folder must hold
    md5: str  # published checksum (torchvision verifies the same values)
    size: int  # bytes, for the progress bar when a server sends no Content-Length


@dataclass(frozen=True)
class Source:
    dataset: str
    description: str
    urls: tuple[str, ...]  # base URLs, tried in order; the archive name is appended
    archives: tuple[Archive, ...]
    classes: tuple[str, ...]


SOURCES: dict[str, Source] = {
    s.dataset: s
    for s in (
        Source(
            "mnist",
            "MNIST handwritten digits: 60k train / 10k test, 28x28 grey (IDX files, LeCun et al.)",
            (
                "https://ossci-datasets.s3.amazonaws.com/mnist/",
                "http://yann.lecun.com/exdb/mnist/",
            ),
            (
                Archive("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
                Archive("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", 28_881),
                Archive("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", 1_648_877),
                Archive("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", 4_542),
            ),
            tuple(str(i) for i in range(10)),
        ),
        Source(
            "cifar10",
            "CIFAR-10: 50k train / 10k test, 32x32 colour, 10 classes (python pickle tarball, Krizhevsky)",
            ("https://www.cs.toronto.edu/~kriz/",),
            (Archive("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a", 170_498_071),),
            ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
        ),
        Source(
            "tinyshakespeare",
            "Tiny Shakespeare: 1.1 MB of plays as plain text, bytes as tokens, first 90 % train (char-rnn, Karpathy)",
            ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/",),
            (Archive("input.txt", "6fb458f1232090904fb40fe944165e91", 1_115_394),),
            (),  # a byte-level corpus: no classes
        ),
    )
}

# Datasets that are imported from a local folder rather than downloaded.
IMPORTED = {"catsdogs": "cats (folder 0/) vs dogs (folder 1/) images, resized to a square; `harness data import`"}
