"""Signed documents (`.p7m`, CAdES/PKCS#7 enveloping signatures): the content they carry.

Italian FatturaPA invoices often travel signed: the XML sits inside a CMS SignedData, as DER or
as base64 text. The signature is not verified here (the SdI exchange did that); only the signed
content is taken out, with asn1crypto, which also reads the BER indefinite lengths some signing
tools write.
"""

from __future__ import annotations

import base64
import binascii
import re

from agents.errors import DocumentError

# A signature of a signature (countersigned files) is unwrapped again, a few levels at most.
MAX_ENVELOPES = 3
_PEM = re.compile(rb"-----(BEGIN|END) [A-Z0-9 ]+-----")
_BASE64 = re.compile(rb"[A-Za-z0-9+/=\s]+")
_SIGNED_TEXT = re.compile(rb"MI[IA][A-Za-z0-9+/]{16}|-----BEGIN ")


def looks_signed(data: bytes) -> bool:
    """True when the bytes may be a CMS structure: DER (a SEQUENCE) or base64 text of one."""
    if data[:1] == b"\x30":
        return True
    # Base64 of a DER SEQUENCE with a long or indefinite length starts "MII" or "MIA".
    return bool(_SIGNED_TEXT.match(data[:64].strip()))


def unwrap_p7m(data: bytes, name: str = "document") -> bytes:
    """The content signed in a `.p7m`, DER or base64; DocumentError when there is none."""
    from asn1crypto import cms

    for _ in range(MAX_ENVELOPES):
        der = _der(data, name)
        try:
            info = cms.ContentInfo.load(der)
            if info["content_type"].native != "signed_data":
                raise DocumentError(f"{name}: a PKCS#7 file, but not a signed document "
                                    f"({info['content_type'].native})")
            content = info["content"]["encap_content_info"]["content"]
            inner = content.native if content is not None else None
        except DocumentError:
            raise
        except Exception as exc:  # asn1crypto raises ValueError/TypeError on malformed structures
            raise DocumentError(f"{name}: not a readable signed (.p7m) file ({exc})") from None
        if not inner:
            raise DocumentError(f"{name}: the signature is detached and carries no document")
        data = bytes(inner)
        if not looks_signed(data) or data.lstrip()[:1] == b"<":
            return data
    return data


def _der(data: bytes, name: str) -> bytes:
    if data[:1] == b"\x30":
        return data
    text = _PEM.sub(b"", data)
    if not _BASE64.fullmatch(text):
        raise DocumentError(f"{name}: not a signed (.p7m) file: neither DER nor base64")
    try:
        return base64.b64decode(b"".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DocumentError(f"{name}: the base64 of the signed (.p7m) file is damaged ({exc})") from None
