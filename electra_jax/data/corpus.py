"""The embedded standard-library corpus: `EmbeddedCorpus`, the default document source.

Documents are as in `electra_jax.data.documents`. `stdlib_documents` builds the corpus in
memory (what pretraining uses); `write_stdlib_corpus` writes it as text shards, for tools and
tests that want files. The corpus needs no network and no data outside the Python
installation: the docstrings of a fixed list of standard-library modules and of their
classes, functions and methods, plus the help topics of `pydoc_data.topics`; one document per
docstring or topic, with doctests and code-like lines dropped and the prose split into
sentences. About 1.7 MB of text on CPython 3.11 (the whole standard library has only about
1.7 MB of docstrings, so this is close to all there is). The docstrings are read in a fresh
interpreter of the running Python, so the corpus is the same, byte for byte, in every process
of one Python installation, whatever that process imported; `embedded_corpus_sha256` is its
hash, which a pretraining run records with its checkpoints.
"""

from __future__ import annotations

import glob
import hashlib
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # This file also runs alone in a bare interpreter (`_build_in_fresh_python`).
  from electra_jax.data.documents import Document


# Standard-library modules whose docstrings make the embedded corpus, sorted: the importable
# modules of CPython 3.11 on Linux (pure Python, plus always-built C modules such as builtins),
# private ones included. Left out: modules with side effects on import (this, antigravity,
# idlelib, tkinter, turtle*, readline, site, __main__ modules), test packages, platform-only
# modules (posix, pwd, fcntl, termios, curses, ...), codec tables (encodings.cp437 ...) and
# modules deprecated or removed in recent Pythons (asyncore, distutils, imp, cgi, lib2to3, ...).
# A module that fails to import (older or newer Python, a minimal build) is skipped.
STDLIB_MODULES: tuple[str, ...] = tuple(sorted((
    "_abc", "_ast", "_asyncio", "_bisect", "_bz2", "_collections", "_collections_abc",
    "_compat_pickle", "_compression", "_contextvars", "_csv", "_datetime", "_decimal",
    "_elementtree", "_functools", "_heapq", "_imp", "_io", "_json", "_locale", "_lzma",
    "_markupbase", "_multiprocessing", "_opcode", "_operator", "_pickle", "_py_abc", "_pydecimal",
    "_pyio", "_queue", "_random", "_signal", "_socket", "_sre", "_stat", "_statistics", "_string",
    "_strptime", "_struct", "_symtable", "_thread", "_threading_local", "_tokenize", "_tracemalloc",
    "_typing", "_warnings", "_weakref", "_weakrefset", "_zoneinfo", "abc", "argparse", "array",
    "ast", "asyncio", "asyncio.base_events", "asyncio.base_futures", "asyncio.base_subprocess",
    "asyncio.base_tasks", "asyncio.constants", "asyncio.coroutines", "asyncio.events",
    "asyncio.exceptions", "asyncio.format_helpers", "asyncio.futures", "asyncio.locks",
    "asyncio.log", "asyncio.mixins", "asyncio.proactor_events", "asyncio.protocols",
    "asyncio.queues", "asyncio.runners", "asyncio.selector_events", "asyncio.sslproto",
    "asyncio.staggered", "asyncio.streams", "asyncio.subprocess", "asyncio.taskgroups",
    "asyncio.tasks", "asyncio.threads", "asyncio.timeouts", "asyncio.transports", "asyncio.trsock",
    "atexit", "base64", "bdb", "binascii", "bisect", "builtins", "bz2", "cProfile", "calendar",
    "cmath", "cmd", "code", "codecs", "codeop", "collections", "collections.abc", "colorsys",
    "compileall", "concurrent", "concurrent.futures", "concurrent.futures._base",
    "concurrent.futures.process", "concurrent.futures.thread", "configparser", "contextlib",
    "contextvars", "copy", "copyreg", "csv", "ctypes", "ctypes._endian", "ctypes.util",
    "dataclasses", "datetime", "dbm", "dbm.dumb", "decimal", "difflib", "dis", "doctest", "email",
    "email._encoded_words", "email._header_value_parser", "email._parseaddr", "email._policybase",
    "email.base64mime", "email.charset", "email.contentmanager", "email.encoders", "email.errors",
    "email.feedparser", "email.generator", "email.header", "email.headerregistry",
    "email.iterators", "email.message", "email.mime", "email.mime.application", "email.mime.audio",
    "email.mime.base", "email.mime.image", "email.mime.message", "email.mime.multipart",
    "email.mime.nonmultipart", "email.mime.text", "email.parser", "email.policy",
    "email.quoprimime", "email.utils", "encodings", "encodings.idna", "encodings.punycode", "enum",
    "errno", "faulthandler", "filecmp", "fileinput", "fnmatch", "fractions", "ftplib", "functools",
    "gc", "genericpath", "getopt", "getpass", "gettext", "glob", "graphlib", "gzip", "hashlib",
    "heapq", "hmac", "html", "html.entities", "html.parser", "http", "http.client",
    "http.cookiejar", "http.cookies", "http.server", "imaplib", "importlib", "importlib._abc",
    "importlib._bootstrap", "importlib._bootstrap_external", "importlib.abc", "importlib.machinery",
    "importlib.metadata", "importlib.metadata._adapters", "importlib.metadata._collections",
    "importlib.metadata._functools", "importlib.metadata._itertools", "importlib.metadata._meta",
    "importlib.metadata._text", "importlib.readers", "importlib.resources",
    "importlib.resources._adapters", "importlib.resources._common",
    "importlib.resources._itertools", "importlib.resources._legacy", "importlib.resources.abc",
    "importlib.resources.readers", "importlib.resources.simple", "importlib.simple",
    "importlib.util", "inspect", "io", "ipaddress", "itertools", "json", "json.decoder",
    "json.encoder", "json.scanner", "json.tool", "keyword", "linecache", "locale", "logging",
    "logging.config", "logging.handlers", "lzma", "mailbox", "marshal", "math", "mimetypes",
    "modulefinder", "multiprocessing", "multiprocessing.connection", "multiprocessing.context",
    "multiprocessing.dummy", "multiprocessing.dummy.connection", "multiprocessing.forkserver",
    "multiprocessing.heap", "multiprocessing.managers", "multiprocessing.pool",
    "multiprocessing.process", "multiprocessing.queues", "multiprocessing.reduction",
    "multiprocessing.resource_sharer", "multiprocessing.resource_tracker",
    "multiprocessing.shared_memory", "multiprocessing.sharedctypes", "multiprocessing.spawn",
    "multiprocessing.synchronize", "multiprocessing.util", "netrc", "ntpath", "nturl2path",
    "numbers", "opcode", "operator", "optparse", "os", "pathlib", "pdb", "pickle", "pickletools",
    "pkgutil", "platform", "plistlib", "poplib", "posixpath", "pprint", "profile", "pstats",
    "py_compile", "pyclbr", "pydoc", "pyexpat", "queue", "quopri", "random", "re", "re._casefix",
    "re._compiler", "re._constants", "re._parser", "reprlib", "runpy", "sched", "secrets",
    "selectors", "shelve", "shlex", "shutil", "signal", "smtplib", "socket", "socketserver",
    "sqlite3", "sqlite3.dbapi2", "sqlite3.dump", "sre_compile", "sre_constants", "sre_parse", "ssl",
    "stat", "statistics", "string", "stringprep", "struct", "subprocess", "symtable", "sys",
    "sysconfig", "tabnanny", "tarfile", "tempfile", "textwrap", "threading", "time", "timeit",
    "token", "tokenize", "tomllib", "tomllib._parser", "tomllib._re", "tomllib._types", "trace",
    "traceback", "tracemalloc", "types", "typing", "unicodedata", "unittest", "unittest._log",
    "unittest.async_case", "unittest.case", "unittest.loader", "unittest.main", "unittest.mock",
    "unittest.result", "unittest.runner", "unittest.signals", "unittest.suite", "unittest.util",
    "urllib", "urllib.error", "urllib.parse", "urllib.request", "urllib.response",
    "urllib.robotparser", "uuid", "venv", "warnings", "wave", "weakref", "webbrowser", "wsgiref",
    "wsgiref.handlers", "wsgiref.headers", "wsgiref.simple_server", "wsgiref.types", "wsgiref.util",
    "wsgiref.validate", "xml", "xml.dom", "xml.dom.NodeFilter", "xml.dom.domreg",
    "xml.dom.expatbuilder", "xml.dom.minicompat", "xml.dom.minidom", "xml.dom.pulldom",
    "xml.dom.xmlbuilder", "xml.etree", "xml.etree.ElementInclude", "xml.etree.ElementPath",
    "xml.etree.ElementTree", "xml.parsers", "xml.parsers.expat", "xml.sax", "xml.sax._exceptions",
    "xml.sax.expatreader", "xml.sax.handler", "xml.sax.saxutils", "xml.sax.xmlreader", "xmlrpc",
    "xmlrpc.client", "xmlrpc.server", "zipapp", "zipfile", "zipimport", "zlib", "zoneinfo",
    "zoneinfo._common", "zoneinfo._tzpath", "zoneinfo._zoneinfo",
)))

STDLIB_SHARD_PATTERN = "stdlib_docs_{:02d}.txt"
STDLIB_MANIFEST = "stdlib_docs.json"


# --------------------------------------------------------------------------------------------
# The embedded standard-library corpus.

_PROMPT = re.compile(r"^(>>>|\.\.\.)(\s|$)")
_ITEM = re.compile(r"^([-*+\u2022]\s|\d{1,2}[.)]\s|\(\w\)\s|[\w.*\[\]]+(\s*\([^)]*\))?\s*(:|--)\s)")
_CODE = re.compile(
    r"^(def \w+\s*\(|class \w+\s*[(:]|import [\w.]+(\s*,\s*[\w.]+)*(\s+as\s+\w+)?$"
    r"|from [\w.]+ import |print\(|@\w|#|(try|else|finally):$"
    r"|(if|elif|for|while|with|except)\b.*[()\[\]=<>].*:$"
    r"|[\w.\[\]'\"]+\s*[-+*/|&]?=\s*\S|[\w.]+\(.*\)[,;]?$|.*::=)")
_ROLE = re.compile(r":[\w-]+(:[\w-]+)?:`~?([^`]*)`")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z])")


def _is_code(line: str) -> bool:
  """True for a stripped docstring line that looks like code rather than prose."""
  if _CODE.match(line):
    return True
  nonspace = sum(1 for c in line if not c.isspace())
  letters = sum(1 for c in line if c.isalpha())
  return nonspace > 0 and letters < 0.6 * nonspace


def _clean(text: str) -> str:
  """Removes light reStructuredText markup and collapses whitespace."""
  text = _ROLE.sub(r"\2", text).replace("``", "")
  return " ".join(text.split())


def _is_prose(sentence: str) -> bool:
  """Keeps sentences of two or more words that are at least half letters."""
  nonspace = sum(1 for c in sentence if not c.isspace())
  letters = sum(1 for c in sentence if c.isalpha())
  return len(sentence.split()) >= 2 and letters >= 0.5 * nonspace


def docstring_sentences(doc: str) -> list[str]:
  """Splits a cleaned docstring (`inspect.getdoc`) into prose sentences.

  Drops doctests (`>>>`/`...` lines and their output), literal blocks (an indented block that
  is not a list, after a blank line that follows a line ending in ':' or '::') and lines that
  look like code; joins wrapped lines, keeps list items and "name: text" fields as their own
  units, then splits units at sentence-ending punctuation and keeps those that read as prose
  (two or more words, at least half letters).
  """
  units: list[list[str]] = []
  current: list[str] = []
  in_doctest = False
  literal_indent = -1  # >= 0 while inside an indented literal block
  colon_indent = -1  # >= 0 right after a line ending in ':', its indentation
  blank_since_colon = False

  def flush() -> None:
    nonlocal current
    if current:
      units.append(current)
      current = []

  for raw in doc.expandtabs(8).split("\n"):
    line = raw.strip()
    indent = len(raw) - len(raw.lstrip())
    if not line:
      flush()
      in_doctest = False
      blank_since_colon = True
      continue
    if literal_indent >= 0:
      if indent > literal_indent:
        continue
      literal_indent = -1
    if (colon_indent >= 0 and blank_since_colon and indent > colon_indent and
        not _ITEM.match(line)):
      literal_indent, colon_indent = colon_indent, -1
      flush()
      continue
    colon_indent = -1
    if _PROMPT.match(line):
      flush()
      in_doctest = True
      continue
    if in_doctest:  # doctest output runs until a blank line
      continue
    if line.endswith(":"):
      colon_indent, blank_since_colon = indent, False
      if line.endswith("::"):
        line = line[:-1].rstrip(" :") + ":" if line.rstrip(": ") else ""
      if not line:
        continue
    if _is_code(line):
      flush()
      continue
    if _ITEM.match(line):
      flush()
    current.append(line)
  flush()

  sentences = []
  for unit in units:
    for sentence in _SENTENCE_BREAK.split(_clean(" ".join(unit))):
      if _is_prose(sentence):
        sentences.append(sentence)
  return sentences


def _documented_here(module, name: str, value: object, modules: dict[str, object]) -> bool:
  """True when `module`'s `value`, held under `name`, is documented with `module`.

  Not when another module of the corpus (`modules`: name -> module) defines it (its
  `__module__`) and holds it under its own name (its `__qualname__`): a re-export, or what a
  module `__getattr__` imported lazily and cached (`concurrent.futures` holds
  `ThreadPoolExecutor` only once something asked it for one). Not when `name` is an alias of
  an object `module` also holds under its own name (`_pyio.OpenWrapper`, likewise cached, is
  `_pyio.open`). Not when it comes from outside the standard library. Everything else is,
  also objects from modules outside the corpus (`os` re-exports `posix`'s functions).
  """
  owner = getattr(value, "__module__", None)
  if isinstance(owner, str) and owner.partition(".")[0] not in sys.stdlib_module_names:
    return False
  qualname = getattr(value, "__qualname__", None)
  if not isinstance(qualname, str):
    return True
  if name != qualname and vars(module).get(qualname) is value:
    return False
  home = modules.get(owner)
  return home is None or home is module or vars(home).get(qualname) is not value


def _documented_objects(module, modules: dict[str, object]) -> Iterator[object]:
  """Yields a module, then its classes and functions (private ones too) that it documents
  (`_documented_here`; `modules` are the corpus's, by name), each class followed by its
  methods and descriptors (properties, slots), all in sorted name order.

  Reads `vars()`, never `getattr` or `dir`, so no module `__getattr__` runs.
  """
  yield module
  for name, value in sorted(vars(module).items()):
    if not ((inspect.isclass(value) or inspect.isroutine(value)) and
            _documented_here(module, name, value, modules)):
      continue
    yield value
    if inspect.isclass(value):
      for _, member in sorted(vars(value).items()):
        if isinstance(member, (staticmethod, classmethod)):
          member = member.__func__
        if inspect.isroutine(member) or inspect.isdatadescriptor(member):
          yield member


def _import_quietly(name: str):
  """Imports a module with warnings silenced; None if it cannot be imported here."""
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      return importlib.import_module(name)
  except Exception:  # pylint: disable=broad-except
    return None


def _collect_documents(modules: Sequence[str], include_topics: bool,
                       group_by_module: bool) -> list[list[str]]:
  """`stdlib_documents`, collected in this interpreter (whatever it has imported)."""
  documents: list[list[str]] = []
  seen_objects: set[int] = set()
  seen_docs: set[str] = set()
  # All of them first, so that each module is documented the same whatever it imports.
  imported = {name: _import_quietly(name) for name in sorted(set(modules))}
  imported = {name: module for name, module in imported.items() if module is not None}
  for module in imported.values():
    module_sentences: list[str] = []
    for obj in _documented_objects(module, imported):
      if id(obj) in seen_objects:
        continue
      seen_objects.add(id(obj))
      try:
        doc = inspect.getdoc(obj)
      except Exception:  # pylint: disable=broad-except
        continue
      if not doc or doc in seen_docs:
        continue
      seen_docs.add(doc)
      sentences = docstring_sentences(doc)
      if group_by_module:
        module_sentences.extend(sentences)
      elif sentences:
        documents.append(sentences)
    if module_sentences:
      documents.append(module_sentences)
  topics = _import_quietly("pydoc_data.topics") if include_topics else None
  for _, text in sorted(getattr(topics, "topics", {}).items()):
    sentences = docstring_sentences(text)
    if sentences:
      documents.append(sentences)
  return documents


# Run by `_build_in_fresh_python`: executes this file's source (from stdin, with the arguments)
# as a module of its own and writes `_collect_documents`'s result to stdout as ASCII JSON.
_CHILD = """\
import json, sys, types
request = json.loads(sys.stdin.read())
module = types.ModuleType("_electra_jax_embedded_corpus")
exec(compile(request["source"], request["file"], "exec"), module.__dict__)
sys.stdout.write(json.dumps(module._collect_documents(**request["arguments"])))
"""


def _build_in_fresh_python(modules: Sequence[str], include_topics: bool,
                           group_by_module: bool) -> list[list[str]]:
  """`_collect_documents` run in a new interpreter of this Python: `sys.executable -I -S`
  (isolated: no PYTHON* variables, no current or user directory on the path; no site, so no
  site-packages and no .pth files), in a session of its own (a Ctrl-C meant for this process
  does not stop it).

  Raises:
    OSError, subprocess.SubprocessError, ValueError: it could not run or gave no documents.
  """
  loader = globals().get("__loader__")
  source = loader.get_source(__name__) if loader is not None else None
  if not source or not sys.executable:
    raise ValueError("no source for the corpus builder or no Python executable to run it")
  request = {"source": source, "file": __file__,
             "arguments": {"modules": list(modules), "include_topics": include_topics,
                           "group_by_module": group_by_module}}
  done = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD],
                        input=json.dumps(request).encode("utf-8"), capture_output=True,
                        timeout=600, check=False, start_new_session=True)
  if done.returncode:
    raise subprocess.SubprocessError(
        f"exit status {done.returncode}: "
        f"{done.stderr.decode('utf-8', 'replace').strip()[-2000:]}")
  return json.loads(done.stdout)


def stdlib_documents(modules: Sequence[str] = STDLIB_MODULES, include_topics: bool = True,
                     group_by_module: bool = False) -> list[Document]:
  """The documents of the embedded corpus.

  One document per distinct docstring (with prose in it) of `modules` and of their classes,
  functions, methods and properties, or with `group_by_module` one per module holding all of
  its docstrings in order (module, then members by name; far longer documents, so examples
  are fuller). Then, if `include_topics`, one per help topic of `pydoc_data.topics` (the
  reference-manual text that `help()` shows, which the standard library ships next to the
  docstrings). Modules that fail to import are skipped. An object held by several of the
  modules counts with the one that defines it (`_documented_here`), or else once, in sorted
  module order; a repeated docstring counts once.

  The docstrings are read in a fresh interpreter of this Python, which imports nothing but
  the standard library (no site-packages): in this process they may have been changed by
  what it imported (typing_extensions replaces functions of `typing`, keras rewrites the
  docstring of `collections.abc.Mapping.get`, torch replaces `inspect.getfile`). So the
  corpus is the same, byte for byte, in every process of one Python installation, whatever
  the process imported first (`embedded_corpus_sha256`). Takes about a second. Should no
  interpreter start, the corpus is read here, with a warning that it may then differ.
  """
  try:
    return _build_in_fresh_python(modules, include_topics, group_by_module)
  except (OSError, subprocess.SubprocessError, ValueError) as e:
    from absl import logging  # pylint: disable=import-outside-toplevel
    logging.warning("Could not build the embedded corpus in a fresh Python interpreter (%s); "
                    "building it in this process instead, where it may differ with what the "
                    "process imported (compare embedded_corpus_sha256)", e)
    return _collect_documents(modules, include_topics, group_by_module)


def documents_sha256(documents: Iterable[Document]) -> str:
  """The hex SHA-256 of documents as text: each document's sentences one per line, then a blank
  line, in UTF-8 (what `write_stdlib_corpus` writes, so its shards concatenated hash the
  same)."""
  digest = hashlib.sha256()
  for document in documents:
    digest.update(("\n".join(document) + "\n\n").encode("utf-8"))
  return digest.hexdigest()


# group_by_module -> documents_sha256 of the embedded corpus, once built in this process.
_SHA256: dict[bool, str] = {}


def embedded_corpus_sha256(group_by_module: bool = True) -> str:
  """The SHA-256 of the embedded corpus as pretraining reads it (`EmbeddedCorpus`, by default
  grouped by module; `documents_sha256`): the same in every process of one Python
  installation. Kept from the first time this process built the corpus (else built now)."""
  if group_by_module not in _SHA256:
    EmbeddedCorpus(group_by_module).documents()
  return _SHA256[group_by_module]


def _write_atomic(path: str, text: str) -> None:
  """Writes UTF-8 text to `path` through a temporary file in the same directory."""
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-")
  try:
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_stdlib_corpus(directory: str, modules: Sequence[str] = STDLIB_MODULES,
                        shard_bytes: int = 512 * 1024,
                        group_by_module: bool = False) -> list[str]:
  """Writes the standard-library docstring corpus as text shards into `directory`.

  Shards are `stdlib_docs_00.txt`, `stdlib_docs_01.txt`, ... of about `shard_bytes` each, one
  sentence per line and a blank line after each document; each is written atomically, and a
  manifest (`stdlib_docs.json`) is written last, so `stdlib_corpus` can reuse a complete
  corpus. Takes a few seconds.

  Returns:
    The shard paths, sorted.
  """
  os.makedirs(directory, exist_ok=True)
  manifest_path = os.path.join(directory, STDLIB_MANIFEST)
  if os.path.exists(manifest_path):  # the corpus is incomplete until the new manifest is in
    os.remove(manifest_path)
  documents = stdlib_documents(modules, group_by_module=group_by_module)
  shards: list[str] = []
  pending: list[str] = []
  size = 0
  for document in documents:
    block = "\n".join(document) + "\n\n"
    pending.append(block)
    size += len(block.encode("utf-8"))
    if size >= shard_bytes:
      shards.append("".join(pending))
      pending, size = [], 0
  if pending:
    shards.append("".join(pending))

  paths = []
  for i, text in enumerate(shards):
    path = os.path.join(directory, STDLIB_SHARD_PATTERN.format(i))
    _write_atomic(path, text)
    paths.append(path)
  for stale in glob.glob(os.path.join(directory, "stdlib_docs_*.txt")):
    if stale not in paths:
      os.remove(stale)
  manifest = {
      "python": sys.version.split()[0],
      "group_by_module": group_by_module,
      "files": [os.path.basename(p) for p in paths],
      "documents": len(documents),
      "bytes": sum(len(s.encode("utf-8")) for s in shards),
  }
  _write_atomic(manifest_path, json.dumps(manifest, indent=1) + "\n")
  return paths


def stdlib_corpus(directory: str, group_by_module: bool = False) -> list[str]:
  """The shard paths of the standard-library corpus in `directory`, writing it unless a
  complete one with the same grouping is there (a restart reuses the corpus its tokenizer was
  trained on, even under another Python version)."""
  try:
    with open(os.path.join(directory, STDLIB_MANIFEST), encoding="utf-8") as f:
      manifest = json.load(f)
    paths = [os.path.join(directory, name) for name in manifest["files"]]
    if (paths and all(os.path.isfile(p) for p in paths) and
        manifest.get("group_by_module", False) == group_by_module):
      return paths
  except (OSError, ValueError, KeyError, TypeError):
    pass
  return write_stdlib_corpus(directory, group_by_module=group_by_module)


class EmbeddedCorpus:
  """The standard-library docstring corpus as a `DocumentSource`, built in memory (about a
  second; nothing is written to disk). `group_by_module` makes one document per module."""
  name = "the embedded corpus"
  files: tuple[str, ...] = ()

  def __init__(self, group_by_module: bool = True):
    self.group_by_module = group_by_module

  def documents(self) -> Iterator[Document]:
    documents = stdlib_documents(group_by_module=self.group_by_module)
    _SHA256[self.group_by_module] = documents_sha256(documents)
    return iter(documents)

  def sha256(self) -> str:
    """The corpus's SHA-256 (`embedded_corpus_sha256`)."""
    return embedded_corpus_sha256(self.group_by_module)
