"""Image conversions the ecosystems' clients apply before sending a camera frame.

:func:`resize_with_pad` is what openpi's clients do (``openpi_client.image_tools``, itself
after ``tf.image.resize_with_pad``): scale the image to fit the target, keeping its aspect
ratio, with PIL's bilinear filter, then paste it centred on black. Written here from that
description and checked pixel for pixel against openpi-client's own function by the tests.

>>> import numpy as np
>>> frame = np.full((480, 640, 3), 200, np.uint8)
>>> padded = resize_with_pad(frame, 224, 224)
>>> padded.shape, padded[0, 0].tolist(), padded[112, 112].tolist()
((224, 224, 3), [0, 0, 0], [200, 200, 200])
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def resize_with_pad(image: NDArray[np.uint8], height: int, width: int) -> NDArray[np.uint8]:
    """``image`` (H, W, C) uint8 fitted into ``height`` x ``width``: aspect kept, bilinear,
    centred on zeros; returned unchanged when it already has that size."""
    from PIL import Image

    if image.shape[:2] == (height, width):
        return image
    picture = Image.fromarray(np.ascontiguousarray(image))
    scale = max(picture.width / width, picture.height / height)
    size = (int(picture.width / scale), int(picture.height / scale))
    resized = picture.resize(size, resample=Image.BILINEAR)
    canvas = Image.new(resized.mode, (width, height), 0)
    canvas.paste(resized, (max(0, int((width - size[0]) / 2)),
                           max(0, int((height - size[1]) / 2))))
    return np.asarray(canvas)


def to_channels_first(image: NDArray) -> NDArray:
    """(H, W, C) to (C, H, W)."""
    return np.ascontiguousarray(np.transpose(image, (2, 0, 1)))


def to_channels_last(image: NDArray) -> NDArray:
    """(C, H, W) to (H, W, C)."""
    return np.ascontiguousarray(np.transpose(image, (1, 2, 0)))
