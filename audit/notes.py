"""C2SP signed notes and tlog checkpoints, signed with the server's Ed25519 key.

A checkpoint note (c2sp.org/tlog-checkpoint) is three lines: the log's
origin, the tree size in decimal, the base64 root hash; then a blank line
and one signature line per signer (c2sp.org/signed-note)::

    aetnaweb.example/audit
    1042
    Xcnaeac...=

    — aetnaweb.example/audit AbCdEf...==

A signature line is an em dash, a space, the key name, a space, and base64
of the 4-byte key ID followed by the 64-byte Ed25519 signature of the note
text (every line before the blank line, newline included). The key ID is the
first four bytes of SHA-256(name || 0x0A || 0x01 || public key).

Keys use the signed-note text forms: the verifier key (shareable)
``<name>+<key id hex>+<base64(0x01 || public key)>`` and the private key
``PRIVATE+KEY+<name>+<key id hex>+<base64(0x01 || seed)>``, kept like the
approval key (a 0600 file named by ``AETNAWEB_CHECKPOINT_KEY_FILE``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from aetnaweb.errors import DomainError

ED25519_ALGORITHM = b"\x01"
SIGNATURE_PREFIX = "\u2014 "
MAX_NOTE_BYTES = 16 * 1024
NO_KEY_MESSAGE = (
    "no checkpoint signing key is configured: set AETNAWEB_CHECKPOINT_KEY_FILE to a file "
    "made by 'manage.py audit keygen NAME --out FILE' (make run uses data/checkpoint_key)"
)


class NoteError(DomainError, ValueError):
    """Text that is not a well-formed checkpoint note, or a key that cannot be used."""

    code = "invalid_note"
    status = 400
    meaning = "a signed note or note key is malformed or does not verify"


def _valid_name(name: str) -> bool:
    return bool(name) and all(33 <= ord(c) <= 126 and c != "+" for c in name)


def key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519_ALGORITHM + public_key).digest()[:4]


@dataclass(frozen=True)
class VerifierKey:
    name: str
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    def text(self) -> str:
        blob = base64.b64encode(ED25519_ALGORITHM + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{blob}"

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        # Base64 may hold '+': only the first two are separators.
        parts = text.strip().split("+", 2)
        if len(parts) != 3 or not _valid_name(parts[0]):
            raise NoteError("a verifier key reads NAME+KEYID+BASE64 (as 'audit public-key' prints)")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise NoteError("the verifier key's key material is not base64") from exc
        if len(blob) != 33 or blob[:1] != ED25519_ALGORITHM:
            raise NoteError("the verifier key is not an Ed25519 key")
        key = cls(parts[0], blob[1:])
        if key.key_id.hex() != parts[1].lower():
            raise NoteError("the verifier key's key ID does not match its name and key")
        return key


@dataclass(frozen=True)
class SignerKey:
    name: str
    seed: bytes

    @property
    def private_key(self) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    @property
    def verifier(self) -> VerifierKey:
        public = self.private_key.public_key().public_bytes_raw()
        return VerifierKey(self.name, public)

    def text(self) -> str:
        blob = base64.b64encode(ED25519_ALGORITHM + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{blob}"

    def sign_line(self, body: str) -> str:
        signature = self.private_key.sign(body.encode("utf-8"))
        blob = base64.b64encode(self.verifier.key_id + signature).decode()
        return f"{SIGNATURE_PREFIX}{self.name} {blob}\n"

    @classmethod
    def generate(cls, name: str) -> SignerKey:
        if not _valid_name(name):
            raise NoteError(
                "a key name is printable ASCII without spaces or '+' (e.g. example.org/audit)"
            )
        return cls(name, Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def parse(cls, text: str) -> SignerKey:
        parts = text.strip().split("+", 4)  # base64 may hold '+'
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"] or not _valid_name(parts[2]):
            raise NoteError("the checkpoint key file does not hold a PRIVATE+KEY+... line")
        try:
            blob = base64.b64decode(parts[4], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise NoteError("the checkpoint key file's key material is not base64") from exc
        if len(blob) != 33 or blob[:1] != ED25519_ALGORITHM:
            raise NoteError("the checkpoint key file does not hold an Ed25519 key")
        key = cls(parts[2], blob[1:])
        if key.verifier.key_id.hex() != parts[3].lower():
            raise NoteError("the checkpoint key file's key ID does not match its key")
        return key


def write_private_key(path: Path, key: SignerKey) -> None:
    """Create ``path`` (0600, never overwriting) holding ``key``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise NoteError(f"{path} already exists; a signing key is never overwritten") from exc
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key.text() + "\n")


def configured_signer(*, required: bool = False) -> SignerKey | None:
    """The signing key named by settings, read at call time; ``None`` when none is set."""
    path = getattr(settings, "AETNAWEB_CHECKPOINT_KEY_FILE", "") or ""
    if not path:
        if required:
            raise NoteError(NO_KEY_MESSAGE)
        return None
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise NoteError(f"cannot read the checkpoint key file {path!r}: {exc}") from exc
    return SignerKey.parse(text)


def checkpoint_body(origin: str, size: int, root: bytes) -> str:
    return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"


def sign_checkpoint(signer: SignerKey, size: int, root: bytes) -> str:
    """A checkpoint note for the tree head, signed by ``signer`` (its name is the origin)."""
    body = checkpoint_body(signer.name, size, root)
    return body + "\n" + signer.sign_line(body)


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    body: str
    signatures: tuple[tuple[str, bytes, bytes], ...]  # (name, key id, signature)

    def signed_by(self, key: VerifierKey) -> bool:
        """A signature line by ``key`` that verifies over the note text."""
        public = Ed25519PublicKey.from_public_bytes(key.public_key)
        for name, kid, signature in self.signatures:
            if name != key.name or kid != key.key_id:
                continue
            try:
                public.verify(signature, self.body.encode("utf-8"))
            except InvalidSignature:
                continue
            return True
        return False


def parse_checkpoint(text: str) -> Checkpoint:
    """A checkpoint note's fields and signature lines; :class:`NoteError` when malformed."""
    if not isinstance(text, str) or len(text.encode("utf-8", "surrogatepass")) > MAX_NOTE_BYTES:
        raise NoteError("a checkpoint note is text of at most 16 KiB")
    if "\x00" in text or "\r" in text:
        raise NoteError("a checkpoint note has no NUL or carriage-return characters")
    body, separator, signature_text = text.partition("\n\n")
    if not separator or not signature_text.endswith("\n"):
        raise NoteError("a checkpoint note needs a blank line then signature lines")
    lines = body.split("\n")
    if len(lines) < 3:
        raise NoteError("a checkpoint note starts with origin, tree size and root hash lines")
    origin, size_text, root_text = lines[0], lines[1], lines[2]
    if not origin or not size_text.isascii() or not size_text.isdigit():
        raise NoteError("a checkpoint's origin is empty or its tree size is not a decimal number")
    if size_text != str(int(size_text)):
        raise NoteError("a checkpoint's tree size has leading zeros")
    try:
        root = base64.b64decode(root_text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError("a checkpoint's root hash is not base64") from exc
    if len(root) != 32:
        raise NoteError("a checkpoint's root hash is not 32 bytes")
    signatures = []
    for line in signature_text[:-1].split("\n"):
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError("a checkpoint's signature line does not start with an em dash")
        name, _, blob_text = line[len(SIGNATURE_PREFIX) :].partition(" ")
        try:
            blob = base64.b64decode(blob_text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise NoteError("a checkpoint's signature is not base64") from exc
        if len(blob) < 5:
            raise NoteError("a checkpoint's signature is too short")
        signatures.append((name, blob[:4], blob[4:]))
    return Checkpoint(origin, int(size_text), root, body + "\n", tuple(signatures))


def add_signature(text: str, signer: SignerKey) -> str:
    """``text`` with ``signer``'s signature line appended (a witness cosignature)."""
    note = parse_checkpoint(text)
    return text + signer.sign_line(note.body)


def ensure_demo_key(data_dir: Path, name: str = "aetnaweb.local/audit") -> str:
    """For ``manage.py demo``: the configured key's verifier, else create ``data/checkpoint_key``.

    Returns one line for the demo's summary. ``make run`` points
    ``AETNAWEB_CHECKPOINT_KEY_FILE`` at that file, as it does for the approval key.
    """
    signer = configured_signer()
    if signer is not None:
        return f"checkpoints are signed by {signer.verifier.text()}"
    path = data_dir / "checkpoint_key"
    if not path.exists():
        write_private_key(path, SignerKey.generate(name))
    key = SignerKey.parse(path.read_text(encoding="ascii"))
    return (
        f"checkpoint signing key: {path} (make run sets AETNAWEB_CHECKPOINT_KEY_FILE to it); "
        f"verifier key {key.verifier.text()}"
    )
