"""A learner's passcode token for any authenticator app: an otpauth:// URI and its QR code.

The URI carries what pam_oath on the login nodes checks (aitestbed.host.passcode):
TOTP, SHA-1, 8 digits, 30 s steps, in the Key URI format authenticator apps read
(https://github.com/google/google-authenticator/wiki/Key-Uri-Format).
"""

from __future__ import annotations

import base64
import io
from urllib.parse import quote, urlencode

import qrcode
import qrcode.image.svg

from aitestbed.host import passcode

ISSUER = "ALCF AI Testbed"


def issuer(cluster: str) -> str:
    return ISSUER if cluster == "aitestbed" else f"{ISSUER} ({cluster})"


def uri(token: dict, user: str, cluster: str) -> str:
    secret = base64.b32encode(bytes.fromhex(token["secret"])).decode().rstrip("=")
    label = quote(f"{issuer(cluster)}:{user}", safe="")
    query = urlencode({"secret": secret, "issuer": issuer(cluster), "algorithm": "SHA1",
                       "digits": passcode.DIGITS, "period": passcode.STEP}, quote_via=quote)
    return f"otpauth://totp/{label}?{query}"


def qr_svg(text: str) -> str:
    """The QR code of `text` as an inline SVG element (no imaging library needed)."""
    image = qrcode.make(text, image_factory=qrcode.image.svg.SvgPathImage, box_size=10,
                        border=2)
    out = io.BytesIO()
    image.save(out)
    svg = out.getvalue().decode()
    return svg[svg.index("<svg"):]
