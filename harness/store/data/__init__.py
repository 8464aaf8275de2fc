"""`harness data`: datasets fetched once on the host into a folder that jobs read, never write.

Sources: the Hugging Face hub through `datasets` (hub.py, the default), the publishers' canonical
archives (fetch.py, download.py, formats.py: standard library only), and folders of images
(imports.py). Optional host extras (`datasets`, Pillow) are imported only by the commands that
need them. Arrays are written as a NumPy-compatible .npz, built byte by byte (npz.py), so jobs
load them with a plain `numpy.load` and never import `datasets` or touch the network.
"""
