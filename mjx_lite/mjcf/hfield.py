"""Height-field assets of the MJCF compiler (MuJoCo 4.0's mjCHField), host numpy.

API:
    compile_hfields(root, ctx)                              # compiler pass: every <asset><hfield> into ctx
    asset = load_hfield(elem, model_dir, meshdir, assets)   # one <hfield> Element -> HFieldAsset
    arrays, sizes = hfield_arrays([asset0, ...])            # hfield_size/nrow/ncol/adr/data, nhfield/nhfielddata
    size, rbound, aabb = hfield_geom_size(asset)            # geom_size/geom_rbound/geom_aabb of a type="hfield" geom

Sources of elevation data, as in MuJoCo:
  - PNG file: decoded here (zlib; no Pillow needed), converted like lodepng to 8-bit grey: the grey channel, or the
    red channel of RGB/RGBA/palette images, 16-bit samples reduced to their high byte, 1/2/4-bit grey scaled to 0-255;
  - any other file: MuJoCo's binary format (int32 nrow, int32 ncol, then nrow*ncol float32);
  - inline `elevation` with `nrow`/`ncol` (row-major as written);
  - `nrow`/`ncol` alone: zeros (to be filled at run time).
The first row of a PNG image or of `elevation` is the last row of hfield_data (MuJoCo flips them: row 0 of the
data is at -y); the binary format is stored as is. Data from a file or `elevation` is then normalised to [0, 1]
by (x - min) / (max - min) (only shifted when max - min is tiny), in float32.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from mjx_lite.mjcf.mesh import read_asset_file
from mjx_lite.mjcf.spec import Element, MJCFError
from mjx_lite.types import MINVAL


@dataclasses.dataclass
class HFieldAsset:
    """A compiled height field.

    name: hfield name (file name without directory and extension when the element has none)
    size: (4,) radius_x, radius_y, elevation_z, base_z
    nrow, ncol: grid size
    data: (nrow * ncol,) float32-valued elevations (row-major, row 0 at -y)
    """

    name: str
    size: np.ndarray
    nrow: int
    ncol: int
    data: np.ndarray


def _err(elem, msg, attribute=None) -> MJCFError:
    if isinstance(elem, Element):
        return MJCFError(msg, elem.file, elem.line, elem.tag, attribute)
    return MJCFError(msg)


# ----------------------------------------------------------------------------------------------------------
# PNG


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    """Undo PNG scanline filters -> (height, stride) uint8."""
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    pos = 0
    for r in range(height):
        ftype = raw[pos]
        line = np.frombuffer(raw, np.uint8, stride, pos + 1).astype(np.int32)
        pos += stride + 1
        if ftype == 0:
            cur = line
        elif ftype == 1:  # sub: running sum per byte lane
            pad = (-stride) % bpp
            lanes = np.concatenate([line, np.zeros(pad, np.int32)]).reshape(-1, bpp)
            cur = (np.cumsum(lanes, axis=0) & 0xFF).reshape(-1)[:stride]
        elif ftype == 2:  # up
            cur = (line + prev) & 0xFF
        elif ftype == 3:  # average
            cur = line.copy()
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:  # paeth
            cur = line.copy()
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
                cur[i] = (cur[i] + pred) & 0xFF
        else:
            raise ValueError(f"bad PNG filter type {ftype}")
        out[r] = cur
        prev = cur
    return out


def decode_png_grey8(data: bytes) -> np.ndarray:
    """Decode a PNG to an 8-bit grey image (height, width) the way lodepng converts to LCT_GREY/8."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos = 8
    idat = []
    palette = None
    header = None
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if ctype == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif ctype == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
    if header is None:
        raise ValueError("missing IHDR")
    width, height, depth, color, _, _, interlace = header
    if width == 0 or height == 0:
        raise ValueError("dimensions are invalid")
    if interlace:
        raise ValueError("interlaced (Adam7) PNG files are not supported")
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color)
    if channels is None:
        raise ValueError(f"bad PNG color type {color}")
    bits = channels * depth
    stride = (width * bits + 7) // 8
    rows = _unfilter(zlib.decompress(b"".join(idat)), height, stride, max(1, bits // 8))
    if depth < 8:
        per = 8 // depth
        shifts = (8 - depth) - depth * np.arange(per)
        samples = ((rows[:, :, None] >> shifts) & ((1 << depth) - 1)).reshape(height, -1)[:, : width * channels]
    elif depth == 8:
        samples = rows.astype(np.int32)
    else:  # 16 bit, big endian: keep the high byte
        samples = rows.reshape(height, -1, 2)[:, :, 0].astype(np.int32)
    samples = samples.reshape(height, width, channels)
    if color == 3:
        if palette is None:
            raise ValueError("palette PNG without PLTE")
        return palette[samples[:, :, 0], 0].astype(np.uint8)  # red channel of the palette colour
    first = samples[:, :, 0]
    if depth < 8:
        first = first * (255 // ((1 << depth) - 1))
    return first.astype(np.uint8)  # grey, or red for RGB/RGBA (lodepng keeps r when converting to grey)


# ----------------------------------------------------------------------------------------------------------


def _attr(elem, key, default=None):
    attrs = elem.attrs if isinstance(elem, Element) else elem
    v = attrs.get(key, default)
    return default if v is None else v


def load_hfield(
    elem: Element | Mapping[str, Any],
    model_dir: str = "",
    meshdir: str = "",
    assets: Mapping[str, bytes] | None = None,
    strippath: bool = False,
) -> HFieldAsset:
    """Load one <hfield> element (attributes typed by the parser). File paths resolve like meshes (meshdir)."""
    file = _attr(elem, "file", "") or ""
    name = _attr(elem, "name", "") or ""
    if not name and file:
        name = os.path.splitext(os.path.basename(file.replace("\\", "/")))[0]
    size = _attr(elem, "size", None)
    if size is None:
        raise _err(elem, "hfield size is required", "size")
    size = np.asarray(size.split() if isinstance(size, str) else size, float).reshape(-1)
    if size.shape != (4,) or np.any(size <= 0):
        raise _err(elem, f"size parameter is not positive in hfield '{name}'", "size")
    nrow = int(_attr(elem, "nrow", 0))
    ncol = int(_attr(elem, "ncol", 0))
    elev = _attr(elem, "elevation", None)
    elev = None if elev is None else np.asarray(elev.split() if isinstance(elev, str) else elev, float).reshape(-1)
    if elev is not None and len(elev) == 0:
        elev = None
    if nrow < 0 or ncol < 0:
        raise _err(elem, "nrow and ncol must be non-negative", "nrow")
    if file:
        if nrow or ncol or elev is not None:
            raise _err(elem, f"hfield '{name}' specified from file and manually", "file")
        raw = read_asset_file(file, model_dir, meshdir, assets, strippath, elem if isinstance(elem, Element) else None)
        ctype = str(_attr(elem, "content_type", "") or "")
        if ctype.startswith("image/png") or (not ctype and file.lower().endswith(".png")):
            try:
                img = decode_png_grey8(raw)
            except (ValueError, zlib.error, struct.error) as e:
                raise _err(elem, f"error decoding PNG file '{file}': {e}", "file") from None
            nrow, ncol = img.shape
            data = img[::-1].astype(np.float32).reshape(-1)
        else:
            if len(raw) < 8:
                raise _err(elem, f"hfield missing header '{file}'", "file")
            nrow, ncol = struct.unpack_from("<2i", raw, 0)
            if nrow < 1 or ncol < 1:
                raise _err(elem, f"non-positive hfield dimensions in file '{file}'", "file")
            if len(raw) != 8 + 4 * nrow * ncol:
                raise _err(elem, f"unexpected file size in file '{file}'", "file")
            data = np.frombuffer(raw, "<f4", nrow * ncol, 8).astype(np.float32)  # not flipped (as MuJoCo)
        data = _normalise(data)
    elif elev is not None:
        if nrow < 1 or ncol < 1:
            raise _err(elem, "nrow and ncol must be positive when elevation is given", "elevation")
        if len(elev) != nrow * ncol:
            raise _err(elem, "elevation data length must match nrow*ncol", "elevation")
        data = elev.astype(np.float32).reshape(nrow, ncol)[::-1].reshape(-1)
        data = _normalise(data)
    else:
        if nrow < 1 or ncol < 1:
            raise _err(elem, f"hfield '{name}' not specified (no file, elevation or nrow/ncol)")
        data = np.zeros(nrow * ncol, np.float32)
    return HFieldAsset(name=name, size=size, nrow=nrow, ncol=ncol, data=data.astype(np.float64))


def _normalise(data: np.ndarray) -> np.ndarray:
    """Shift/scale float32 elevations to [0, 1] as MuJoCo does."""
    data = data.astype(np.float32)
    emin, emax = data.min(), data.max()
    data = data - emin
    if float(emax) - float(emin) > MINVAL:
        data = data / (emax - emin)
    return data.astype(np.float32)


def hfield_arrays(hfields: list[HFieldAsset]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """mjModel hfield arrays and sizes (nhfield, nhfielddata)."""
    n = np.array([h.nrow * h.ncol for h in hfields], np.int32)
    arrays = {
        "hfield_size": np.array([h.size for h in hfields], float).reshape(-1, 4),
        "hfield_nrow": np.array([h.nrow for h in hfields], np.int32),
        "hfield_ncol": np.array([h.ncol for h in hfields], np.int32),
        "hfield_adr": (np.cumsum(n) - n).astype(np.int32),
        "hfield_data": np.concatenate([h.data for h in hfields]) if hfields else np.zeros(0),
    }
    return arrays, {"nhfield": len(hfields), "nhfielddata": int(n.sum())}


def hfield_geom_size(hfield: HFieldAsset) -> tuple[np.ndarray, float, np.ndarray]:
    """(geom_size (3,), geom_rbound, geom_aabb (6,)) of a type="hfield" geom, as MuJoCo fills them."""
    sx, sy, sz, base = hfield.size
    size = np.array([sx, sy, 0.25 * sz + 0.5 * base])
    rbound = float(np.sqrt(sx * sx + sy * sy + max(sz, base) ** 2))
    aabb = np.array([0.0, 0.0, (sz - base) / 2, sx, sy, (sz + base) / 2])
    return size, rbound, aabb


def compile_hfields(root: Element, ctx) -> None:
    """Compiler pass: load every <asset><hfield> of `root` into `ctx` (a CompileContext).

    Fills ctx.ids['hfield'], ctx.elements['hfield'], ctx.arrays (hfield_*), ctx.sizes (nhfield, nhfielddata) and
    ctx.hfield_assets (list of HFieldAsset). File names resolve against <compiler meshdir> (else assetdir).
    """
    els = [c for a in root.children if a.tag == "asset" for c in a.children if c.tag == "hfield"]
    ids = ctx.ids.setdefault("hfield", {})
    loaded = []
    for el in els:
        cs = el.compiler if el.compiler is not None else ctx.compiler  # (an attached model's: its own directories)
        meshdir = cs.get("meshdir") or cs.get("assetdir") or ""
        h = load_hfield(el, cs.get("_model_dir", getattr(ctx, "model_dir", None)) or "", meshdir,
                        getattr(ctx, "assets", None), bool(cs.get("strippath")))  # fmt: skip
        if not h.name:
            raise _err(el, "empty name in height field", "name")
        if h.name in ids:
            raise _err(el, f"repeated name '{h.name}' in hfield", "name")
        ids[h.name] = len(loaded)
        ctx.elements.setdefault("hfield", []).append(el)
        loaded.append(h)
    arrays, sizes = hfield_arrays(loaded)
    ctx.arrays.update(arrays)
    ctx.sizes.update(sizes)
    ctx.hfield_assets = loaded
