"""Whether Qt draws letters at all: with no font found (Qt's offscreen platform on Windows
under Wine, unless QT_QPA_FONTDIR names a folder of fonts) every character is the same
empty box, and a window's picture has no text in it while looking complete.

Two different letters drawn alike means boxes: no font. The window's snapshot asks this and
refuses to write a picture without text (the Windows set's snapshot test then fails)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter

# Letters of both alphabets with nothing in common: in any real font their images differ.
PROBES = ("Ж", "о", "W", "i")


def _image(text: str, font: QFont) -> QImage:
    image = QImage(48, 48, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setFont(font)
    painter.setPen(QColor("black"))
    painter.drawText(image.rect(), Qt.AlignmentFlag.AlignCenter, text)
    painter.end()
    return image


def ink(image: QImage) -> int:
    """The dark pixels of an image (a rendered label's letters)."""
    return sum(1 for y in range(image.height()) for x in range(image.width())
               if QColor(image.pixel(x, y)).lightness() < 128)


def drawn(font: QFont | None = None) -> bool:
    """Whether `font` (the application's) draws letters, not boxes: the probes' images
    differ from each other, and each has ink."""
    font = font or QFont()
    images = [_image(p, font) for p in PROBES]
    if any(ink(i) == 0 for i in images):
        return False
    return len({bytes(i.constBits()) for i in images}) == len(images)
