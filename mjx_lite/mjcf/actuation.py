"""Compiler pass for <actuator>: general actuators, the shortcuts, their class defaults, transmissions.

Default resolution (MuJoCo 4.0, modeling guide "Actuator shortcuts"): every class holds ONE actuator default,
written with `general` or a shortcut. The parser hands us, in `Element.defaults`, the actuator elements of the
applicable classes (outermost first); they and the actuator itself are applied in order to a running state:
  - mechanical attributes (ctrlrange, gear, group, ...) are taken from any of them as written;
  - `general` sets only the attributes it writes (and inherits raw dyn/gain/bias parameters from anything);
  - a shortcut resets dyn/gain/bias parameters and the activation layout to its documented table, and takes
    its own parameters (kp, kv, area, ...) from the nearest earlier element written with the same shortcut or
    with `general` of the shortcut's gain type (reading the raw parameters as the shortcut's), else from its
    documented defaults. (MuJoCo searches per class; we search per element, identical unless one class writes
    several actuator elements.)
Derived constants (acc0, length0, dampratio -> kv, muscle lengthrange) are computed by `finalize_sections`.
"""

from __future__ import annotations

import copy
from typing import Any

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import io
from mjx_lite.mjcf import plugins
from mjx_lite.mjcf.attrs import autolimits, error, register_all, resolve_limited, section_children, unsupported
from mjx_lite.mjcf.context import CompileContext, dof_tree_mask, provisional_model
from mjx_lite.mjcf.inertia import factor_ld, solve_ld
from mjx_lite.mjcf.spec import Element, MJCFError
from mjx_lite.pipeline import inertia, kinematics, step, transmission
from mjx_lite.pipeline import tendon as ptendon
from mjx_lite.types import BiasType, DisableBit, DynType, GainType, Input, JointType, TrnType, actuator_slots

SHORTCUTS = ("motor", "position", "velocity", "intvelocity", "damper", "cylinder", "muscle", "adhesion", "pid",
             "dcmotor", "orientation")
UNSUPPORTED: tuple[str, ...] = ()
_GAIN_OF = {"motor": GainType.FIXED, "position": GainType.FIXED, "velocity": GainType.FIXED,
            "intvelocity": GainType.FIXED, "damper": GainType.AFFINE, "cylinder": GainType.FIXED,
            "muscle": GainType.MUSCLE, "adhesion": GainType.FIXED, "pid": GainType.PID,
            "dcmotor": GainType.DCMOTOR, "orientation": GainType.SO3}  # fmt: skip
_CTRLSPEC_OF = {"position": 1, "velocity": 2, "intvelocity": 2, "cylinder": 32}
_DYN = {"none": DynType.NONE, "integrator": DynType.INTEGRATOR, "filter": DynType.FILTER,
        "filterexact": DynType.FILTEREXACT, "muscle": DynType.MUSCLE, "user": DynType.USER, "pid": DynType.PID,
        "dcmotor": DynType.DCMOTOR}  # fmt: skip
_GAIN = {"fixed": GainType.FIXED, "affine": GainType.AFFINE, "muscle": GainType.MUSCLE, "user": GainType.USER,
         "pid": GainType.PID, "dcmotor": GainType.DCMOTOR, "so3": GainType.SO3}  # fmt: skip
_BIAS = {"none": BiasType.NONE, "affine": BiasType.AFFINE, "muscle": BiasType.MUSCLE, "user": BiasType.USER,
         "dcmotor": BiasType.DCMOTOR, "so3": BiasType.SO3}  # fmt: skip
_UNSUPPORTED_TYPES: tuple[str, ...] = ()
# input charts of so3 (orientation) actuators (MuJoCo's mjtChart, in actuator_ctrlspec): 3 or 4 controls
CHART_EXPMAP, CHART_QUAT = 1, 2
_CHARTS = {"expmap": CHART_EXPMAP, "quat": CHART_QUAT}
# input tokens of pid/dcmotor signatures, in canonical order (MuJoCo's mjtInput bits)
_INPUT_BITS = {"pos": Input.POS, "vel": Input.VEL, "ff": Input.FF, "voltage": Input.VOLTAGE,
               "pressure": Input.PRESSURE}  # fmt: skip
_MUSCLE_DEFAULTS = dict(timeconst=(0.01, 0.04), tausmooth=0.0, range=(0.75, 1.05), force=-1.0, scale=200.0,
                        lmin=0.5, lmax=1.6, vmax=1.5, fpmax=1.3, fvmax=1.2)  # fmt: skip
_MUSCLE_KEYS = ("force", "scale", "lmin", "lmax", "vmax", "fpmax", "fvmax")
_TARGETS = ("joint", "jointinparent", "tendon", "cranksite", "site", "body")

# attributes copied from any element as written (mechanical / bookkeeping)
_MECHANICAL = ("group", "ctrllimited", "forcelimited", "actlimited", "ctrlrange", "forcerange", "actrange",
               "lengthrange", "cranklength", "armature", "delay", "nsample", "interp", "user", "actearly",
               "velrange", "ffrange")  # fmt: skip


def _builtin() -> dict[str, Any]:
    """MuJoCo's built-in actuator default (a `general`)."""
    return dict(
        kind="general", dyntype=DynType.NONE, gaintype=GainType.FIXED, biastype=BiasType.NONE,
        dynprm=_prm(1.0), gainprm=_prm(1.0), biasprm=_prm(0.0), actdim=-1, actearly=False,
        ctrllimited="auto", forcelimited="auto", actlimited="auto", ctrlrange=np.zeros(2), forcerange=np.zeros(2),
        actrange=np.zeros(2), lengthrange=np.zeros(2), gear=np.array([1.0, 0, 0, 0, 0, 0]), damping=np.zeros(3),
        armature=0.0, cranklength=0.0, group=0, nsample=0, interp="zoh", delay=0.0, inheritrange=0.0, ctrlspec=0,
        user=None, velrange=np.zeros(2), ffrange=np.zeros(2), explicit_ctrlrange=False, explicit_actrange=False,
    )  # fmt: skip


def _prm(first: float) -> np.ndarray:
    p = np.zeros(10)
    p[0] = first
    return p


def _written(el: Element, name: str) -> bool:
    return el.attrs.get(name) is not None


def _overwrite(el: Element, name: str, target: np.ndarray) -> np.ndarray:
    """Non-exact vector reading: the written values replace the leading entries of `target`."""
    v = np.atleast_1d(np.asarray(el.attrs[name], np.float64))
    if v.size > target.size:
        raise error(el, f"at most {target.size} values allowed, got {v.size}", name)
    out = np.array(target, np.float64, copy=True)
    out[: v.size] = v
    return out


def _keyword(el: Element, name: str, table: dict) -> Any:
    v = el.attrs[name]
    if v not in table:
        if v in _UNSUPPORTED_TYPES:
            raise unsupported(el, f"{name} '{v}' is not supported by mjx_lite", name)
        raise error(el, f"invalid keyword '{v}' (expected one of {', '.join(table)})", name)
    return table[v]


def _source(kind: str, levels: list[dict]) -> dict | None:
    """Nearest earlier state a shortcut of `kind` inherits its parameters from."""
    for st in reversed(levels):
        if st["kind"] == kind or (st["kind"] == "general" and st["gaintype"] == _GAIN_OF[kind]):
            return st
    return None


def _apply(el: Element, state: dict, levels: list[dict]) -> dict:
    """Apply one actuator element (a default or the actuator itself) to the running state."""
    tag = el.tag
    if tag in UNSUPPORTED:
        raise unsupported(el, f"<{tag}> actuators are not supported by mjx_lite")
    if tag != "general" and tag != "plugin" and tag not in SHORTCUTS:
        raise error(el, f"unknown actuator type <{tag}>")
    st = copy.deepcopy(state)
    st["kind"] = tag
    for k in _MECHANICAL:
        if _written(el, k):
            v = el.attrs[k]
            st[k] = np.array(v, np.float64) if isinstance(v, np.ndarray) and k != "user" else v
    if _written(el, "ctrlrange"):
        st["explicit_ctrlrange"] = True
    if _written(el, "actrange"):
        st["explicit_actrange"] = True
    if _written(el, "gear"):
        st["gear"] = _overwrite(el, "gear", np.array([1.0, 0, 0, 0, 0, 0]))
    if _written(el, "damping"):
        st["damping"] = _overwrite(el, "damping", np.zeros(3))
    for k in ("ctrllimited", "forcelimited", "actlimited"):
        if isinstance(st[k], (bool, np.bool_)):
            st[k] = "true" if st[k] else "false"

    if tag == "plugin":  # an actuator plugin (mjcf/plugins.py): MuJoCo reads only its activation dynamics
        if _written(el, "dyntype"):
            st["dyntype"] = _keyword(el, "dyntype", _DYN)
        if _written(el, "dynprm"):
            st["dynprm"] = _overwrite(el, "dynprm", st["dynprm"])
        if _written(el, "actdim"):
            st["actdim"] = int(el.attrs["actdim"])
        return st

    if tag == "general":
        gaintype0 = st["gaintype"]
        if _written(el, "dyntype"):
            st["dyntype"] = _keyword(el, "dyntype", _DYN)
        if _written(el, "gaintype"):
            st["gaintype"] = _keyword(el, "gaintype", _GAIN)
        if _written(el, "biastype"):
            st["biastype"] = _keyword(el, "biastype", _BIAS)
        for k in ("dynprm", "gainprm", "biasprm"):
            if _written(el, k):
                st[k] = _overwrite(el, k, st[k])
        if _written(el, "actdim"):
            st["actdim"] = int(el.attrs["actdim"])
        if _written(el, "inheritrange"):
            st["inheritrange"] = float(el.attrs["inheritrange"])
        if st["gaintype"] != gaintype0:
            st["ctrlspec"] = 0  # an inherited input signature is discarded when the gaintype changes
        if _written(el, "input"):
            key = str(el.attrs["input"]).strip()
            if st["gaintype"] in (GainType.PID, GainType.DCMOTOR):
                st["ctrlspec"] = _input_spec(el)
            elif st["gaintype"] == GainType.SO3:
                st["ctrlspec"] = _chart(el)
            else:
                bits = _chart(el)  # (a chart keyword on a fixed or affine gain: its bit, as MuJoCo)
                if key and st["gaintype"] not in (GainType.FIXED, GainType.AFFINE):
                    raise error(el, "input declarations need gaintype fixed, affine, pid or dcmotor", "input")
                if bits not in (0, Input.POS, Input.VEL, Input.PRESSURE):
                    raise error(el, "fixed and affine gains take one input, 'pos', 'vel' or 'pressure'", "input")
                st["ctrlspec"] = bits
        return st

    f = {k: float(v) for k, v in el.attrs.items() if k in _SCALARS and v is not None and np.ndim(v) == 0}
    if tag == "pid":
        return _apply_pid(el, st, f)
    if tag == "dcmotor":
        return _apply_dcmotor(el, st)
    if tag == "orientation":
        return _apply_orientation(el, st, f)
    src = _source(tag, levels)
    st["actdim"] = -1
    st["ctrlspec"] = _CTRLSPEC_OF.get(tag, 0)
    if tag not in ("position", "intvelocity"):
        st["inheritrange"] = 0.0
    if tag == "motor":
        st.update(dyntype=DynType.NONE, gaintype=GainType.FIXED, biastype=BiasType.NONE,
                  dynprm=_prm(1.0), gainprm=_prm(1.0), biasprm=_prm(0.0))  # fmt: skip
    elif tag in ("position", "intvelocity"):
        kp = src["gainprm"][0] if src else 1.0
        b2 = src["biasprm"][2] if src else 0.0
        tc = src["dynprm"][0] if src is not None and src["dyntype"] == DynType.FILTEREXACT else 0.0
        inherit = src["inheritrange"] if src else 0.0
        kp = f.get("kp", kp)
        if "kv" in f and "dampratio" in f:
            raise error(el, "kv and dampratio cannot both be defined", "dampratio")
        if "kp" in f and f["kp"] < 0:
            raise error(el, "kp cannot be negative", "kp")
        if "kv" in f:
            if f["kv"] < 0:
                raise error(el, "kv cannot be negative", "kv")
            b2 = -f["kv"]
        if "dampratio" in f:
            if f["dampratio"] < 0:
                raise error(el, "dampratio cannot be negative", "dampratio")
            b2 = f["dampratio"]
        if "timeconst" in f:
            if f["timeconst"] < 0:
                raise error(el, "timeconst cannot be negative", "timeconst")
            tc = f["timeconst"]
        inherit = f.get("inheritrange", inherit)
        gain, bias = _prm(kp), _prm(0.0)
        bias[1], bias[2] = -kp, b2
        dyn = _prm(tc if tc > 0 else 1.0)
        dyntype = DynType.FILTEREXACT if tc > 0 else DynType.NONE
        if tag == "intvelocity":
            dyntype = DynType.INTEGRATOR
        st.update(dyntype=dyntype, gaintype=GainType.FIXED, biastype=BiasType.AFFINE, dynprm=dyn, gainprm=gain,
                  biasprm=bias, inheritrange=inherit)  # fmt: skip
    elif tag == "velocity":
        kv = f.get("kv", src["gainprm"][0] if src else 1.0)
        bias = _prm(0.0)
        bias[2] = -kv
        st.update(dyntype=DynType.NONE, gaintype=GainType.FIXED, biastype=BiasType.AFFINE, dynprm=_prm(1.0),
                  gainprm=_prm(kv), biasprm=bias)  # fmt: skip
    elif tag == "damper":
        kv = f.get("kv", -src["gainprm"][2] if src else 0.0)
        if kv < 0:
            raise error(el, "damping coefficient cannot be negative", "kv")
        gain = _prm(0.0)
        gain[2] = -kv
        st.update(dyntype=DynType.NONE, gaintype=GainType.AFFINE, biastype=BiasType.NONE, dynprm=_prm(1.0),
                  gainprm=gain, biasprm=_prm(0.0), ctrllimited="true")  # fmt: skip
    elif tag == "cylinder":
        tc = src["dynprm"][0] if src else 1.0
        area = src["gainprm"][0] if src else 1.0
        bias = np.array(src["biasprm"][:3]) if src else np.zeros(3)
        tc = f.get("timeconst", tc)
        area = f.get("area", area)
        if _written(el, "bias"):
            bias = _overwrite(el, "bias", bias)
        if "diameter" in f and f["diameter"] >= 0:
            area = np.pi / 4 * f["diameter"] ** 2
        b = _prm(0.0)
        b[:3] = bias
        st.update(dyntype=DynType.FILTER, gaintype=GainType.FIXED, biastype=BiasType.AFFINE, dynprm=_prm(tc),
                  gainprm=_prm(area), biasprm=b)  # fmt: skip
    elif tag == "muscle":
        if src is not None:
            p = dict(timeconst=tuple(src["dynprm"][0:2]), tausmooth=src["dynprm"][2], range=tuple(src["gainprm"][0:2]),
                     **{k: src["gainprm"][2 + i] for i, k in enumerate(_MUSCLE_KEYS)})  # fmt: skip
        else:
            p = dict(_MUSCLE_DEFAULTS)
        # mjs_setToMuscle: a negative value keeps the current one (tausmooth excepted: an error)
        for k in ("timeconst", "range"):
            if _written(el, k):
                new = _overwrite(el, k, np.array(p[k]))
                p[k] = tuple(n if n >= 0 else o for n, o in zip(new, p[k]))
        if "tausmooth" in f:
            p["tausmooth"] = f["tausmooth"]
        for k in _MUSCLE_KEYS:
            if k in f and f[k] >= 0:
                p[k] = f[k]
        if p["tausmooth"] < 0:
            raise error(el, "muscle tausmooth cannot be negative", "tausmooth")
        dyn = _prm(0.0)
        dyn[0:3] = (*p["timeconst"], p["tausmooth"])
        gain = _prm(0.0)
        gain[0:9] = (*p["range"], *(p[k] for k in _MUSCLE_KEYS))
        st.update(dyntype=DynType.MUSCLE, gaintype=GainType.MUSCLE, biastype=BiasType.MUSCLE, dynprm=dyn,
                  gainprm=gain, biasprm=gain.copy())  # fmt: skip
    elif tag == "adhesion":
        gain = f.get("gain", src["gainprm"][0] if src else 1.0)
        if gain < 0:
            raise error(el, "adhesion gain cannot be negative", "gain")
        st.update(dyntype=DynType.NONE, gaintype=GainType.FIXED, biastype=BiasType.NONE, dynprm=_prm(1.0),
                  gainprm=_prm(gain), biasprm=_prm(0.0), ctrllimited="true")  # fmt: skip
    return st


_SCALARS = ("kp", "kv", "dampratio", "timeconst", "inheritrange", "area", "diameter", "tausmooth", "force", "scale",
            "lmin", "lmax", "vmax", "fpmax", "fvmax", "gain", "ki", "imax", "slewmax", "resistance")  # fmt: skip


def _input_spec(el: Element) -> int:
    """The input signature written in `input`: "none" (Input.NONE) or tokens of [pos, vel, ff, voltage, pressure]
    in that canonical order, as bits (0: empty, the actuator type's default)."""
    text = str(el.attrs["input"]).split()
    if text == ["none"]:
        return int(Input.NONE)
    spec, last = 0, 0
    for tok in text:
        if tok not in _INPUT_BITS:
            raise error(el, f"invalid keyword '{tok}' (expected none or a subset of {', '.join(_INPUT_BITS)})",
                        "input")  # fmt: skip
        bit = int(_INPUT_BITS[tok])
        if bit <= last:
            raise error(el, "inputs must be listed in canonical order [pos, vel, ff, voltage, pressure]", "input")
        spec |= bit
        last = bit
    return spec


def _chart(el: Element) -> int:
    """`input` read as MuJoCo's reader does: a chart keyword, expmap (1) or quat (2), else the input tokens' bits
    (so pos reads as expmap, vel as quat; `_so3_block` refuses any other value on an so3 actuator)."""
    key = str(el.attrs["input"]).strip()
    return _CHARTS[key] if key in _CHARTS else _input_spec(el)


def _apply_orientation(el: Element, st: dict, f: dict) -> dict:
    """<orientation> (MuJoCo's mjs_setToOrientation): gaintype and biastype so3, dyntype none, gainprm[0] = kp,
    biasprm[1] = -kp, biasprm[2] = -kv or the damping ratio (resolved by `finalize_sections`); kp and the other
    parameters not written come from the class's actuator. The input chart (`input`) is expmap unless written or
    inherited from an so3 class."""
    kp = f.get("kp", float(st["gainprm"][0]))
    if "kv" in f and "dampratio" in f:
        raise error(el, "kv and dampratio cannot both be defined", "dampratio")
    gain, bias = np.array(st["gainprm"], float), np.array(st["biasprm"], float)
    gain[0], bias[1] = kp, -kp
    if "kv" in f:
        if f["kv"] < 0:
            raise error(el, "kv cannot be negative", "kv")
        bias[2] = -f["kv"]
    if "dampratio" in f:
        if f["dampratio"] < 0:
            raise error(el, "dampratio cannot be negative", "dampratio")
        bias[2] = f["dampratio"]
    spec = int(st["ctrlspec"]) if st["gaintype"] == GainType.SO3 else 0
    if _written(el, "input"):
        spec = _chart(el)
    st.update(dyntype=DynType.NONE, gaintype=GainType.SO3, biastype=BiasType.SO3, gainprm=gain, biasprm=bias,
              ctrlspec=spec, actdim=-1, inheritrange=0.0)  # fmt: skip
    return st


def _apply_pid(el: Element, st: dict, f: dict) -> dict:
    """<pid> (MuJoCo's mjs_setToPID): kp/kv/dampratio in biasprm[1:3], ki in gainprm[0], imax and slewmax in
    dynprm[0:2]; dyntype "pid" when ki or slewmax is set. Unwritten values come from the class's actuator when it
    is a pid one (gaintype pid), else from the documented defaults."""
    inherited = st["gaintype"] == GainType.PID
    kp = -st["biasprm"][1] if inherited else 1.0
    b2 = st["biasprm"][2] if inherited else 0.0
    ki = st["gainprm"][0] if inherited else 0.0
    imax = st["dynprm"][0] if inherited else 0.0
    slew = st["dynprm"][1] if inherited else 0.0
    spec = st["ctrlspec"] if inherited else 0
    kp, ki, imax, slew = f.get("kp", kp), f.get("ki", ki), f.get("imax", imax), f.get("slewmax", slew)
    if "kv" in f and "dampratio" in f:
        raise error(el, "kv and dampratio cannot both be defined", "dampratio")
    if "kv" in f:
        if f["kv"] < 0:
            raise error(el, "kv cannot be negative", "kv")
        b2 = -f["kv"]
    if "dampratio" in f:
        if f["dampratio"] < 0:
            raise error(el, "dampratio cannot be negative", "dampratio")
        b2 = f["dampratio"]
    if slew < 0:
        raise error(el, "slewmax cannot be negative", "slewmax")
    if _written(el, "posrange"):
        st["ctrlrange"] = np.array(el.attrs["posrange"], np.float64)
        st["explicit_ctrlrange"] = True
    if "inheritrange" in f:
        st["inheritrange"] = f["inheritrange"]
    if st["inheritrange"] > 0 and (st["ctrlrange"][0] or st["ctrlrange"][1]):
        raise error(el, "posrange and inheritrange cannot both be defined", "inheritrange")
    if _written(el, "input"):
        spec = _input_spec(el)
    dyn, gain, bias = _prm(0.0), _prm(0.0), _prm(0.0)
    gain[0] = ki
    dyn[1] = slew
    if ki:
        dyn[0] = imax
    bias[1], bias[2] = -kp, b2
    st.update(dyntype=DynType.PID if (ki or slew) else DynType.NONE, gaintype=GainType.PID,
              biastype=BiasType.AFFINE, dynprm=dyn, gainprm=gain, biasprm=bias, ctrlspec=spec)  # fmt: skip
    return st


def _vec(el: Element, name: str, n: int, base) -> np.ndarray:
    """Attribute `name` read over `base` (its leading entries replaced by the written values)."""
    out = np.zeros(n) if base is None else np.array(base, np.float64)
    if _written(el, name):
        v = np.atleast_1d(np.asarray(el.attrs[name], np.float64))
        out[: v.size] = v
    return out


def _apply_dcmotor(el: Element, st: dict) -> dict:
    """<dcmotor> (MuJoCo's mjs_setToDCMotor): the electrical, thermal, friction and controller parameters packed
    into gainprm [R, K, alpha, T0, kp, ki, kd, Vmax], dynprm [te, didt_max, RT, C, Ta, sigma0, sigma1, slewmax,
    Imax] and biasprm [cogging A, poles, phase, F_C, F_S, v_S]; one activation per enabled state (slot order:
    slew, integral, temperature, bristle, current); actearly. Unwritten values come from the class's actuator when
    it is a dcmotor one."""
    inh = st["gaintype"] == GainType.DCMOTOR
    g, dp, bp = st["gainprm"], st["dynprm"], st["biasprm"]
    motorconst = _vec(el, "motorconst", 2, [g[1] if inh else 0.0, 0.0])
    R = float(el.attrs["resistance"]) if _written(el, "resistance") else (g[0] if inh else 0.0)
    nominal = _vec(el, "nominal", 3, None)
    saturation = _vec(el, "saturation", 3, [0.0, 0.0, dp[1] if inh else 0.0])
    controller = _vec(el, "controller", 6, [g[4], g[5], g[6], dp[7], dp[8], g[7]] if inh else None)
    inductance = _vec(el, "inductance", 2, [0.0, dp[0] if inh else 0.0])
    cogging = _vec(el, "cogging", 3, bp[:3] if inh else None)
    thermal = _vec(el, "thermal", 6, [dp[2], dp[3], 0.0, g[2], g[3], dp[4]] if inh else None)
    lugre = _vec(el, "lugre", 5, [dp[5], dp[6], bp[3], bp[4], bp[5]] if inh else None)
    spec = st["ctrlspec"] if inh else 0
    if _written(el, "input"):
        spec = _input_spec(el)
    Kt, Ke = motorconst
    vn, tau0, omega0 = nominal
    if vn > 0 and Ke <= 0 and omega0 > 0:  # Ke from the nominal point: omega0 = vn Ke / (Ke^2 + R B)
        B = float(st["damping"][0])
        if B > 0 and R > 0:
            disc = vn * vn - 4 * R * B * omega0 * omega0
            Ke = (vn + np.sqrt(disc)) / (2 * omega0) if disc > 0 else vn / omega0
        elif B > 0 and tau0 > 0:
            exact = vn / omega0 - vn * B / tau0
            Ke = exact if exact > 0 else vn / omega0
        else:
            Ke = vn / omega0
    K = np.sqrt(Kt * Ke) if (Kt > 0 and Ke > 0) else (Kt if Kt > 0 else Ke)
    if R == 0 and vn > 0 and tau0 > 0 and K > 0:
        R = K * vn / tau0
    if Kt < 0 or Ke < 0:
        raise error(el, "DC motor: motor constants must be non-negative", "motorconst")
    if K <= 0 and spec != Input.NONE:
        raise error(el, "DC motor: motor constant K must be positive", "motorconst")
    if R <= 0:
        raise error(el, "DC motor: resistance R must be positive", "resistance")
    gain, dyn, bias = _prm(0.0), _prm(0.0), _prm(0.0)
    gain[0], gain[1] = R, K
    gain[4:7] = controller[0:3]
    dyn[7], dyn[8] = controller[3], controller[4]
    if controller[5] > 0:
        gain[7] = controller[5]
    if saturation[0] > 0 or saturation[1] > 0:
        tmax = saturation[0] if saturation[0] != 0 else K * saturation[1]
        st["forcerange"] = np.array([-tmax, tmax])
        st["forcelimited"] = "true"
    if saturation[2] > 0:
        dyn[1] = saturation[2]
    bias[0:3] = cogging
    if inductance[0] < 0:
        raise error(el, "DC motor: inductance must be non-negative", "inductance")
    if inductance[1] < 0:
        raise error(el, "DC motor: electrical time constant must be non-negative", "inductance")
    dyn[0] = inductance[0] / R if inductance[0] > 0 else inductance[1]
    if thermal[0] > 0 or thermal[1] > 0 or thermal[2] > 0:
        RT, C, tth = thermal[0], thermal[1], thermal[2]
        if tth > 0 and RT > 0 and C == 0:
            C = tth / RT
        elif tth > 0 and C > 0 and RT == 0:
            RT = tth / C
        elif tth > 0 and RT > 0 and C > 0:
            C = tth / RT
        if RT <= 0:
            raise error(el, "DC motor: thermal resistance must be positive", "thermal")
        if C <= 0:
            raise error(el, "DC motor: thermal capacitance must be positive", "thermal")
        dyn[2], dyn[3], dyn[4] = RT, C, thermal[5]
        gain[2], gain[3] = thermal[3], thermal[4]
    if lugre[0] > 0:
        dyn[5], dyn[6] = lugre[0], lugre[1]
        bias[3:6] = lugre[2:5]
    st.update(dyntype=DynType.DCMOTOR, gaintype=GainType.DCMOTOR, biastype=BiasType.DCMOTOR, dynprm=dyn,
              gainprm=gain, biasprm=bias, ctrlspec=spec, actearly=True, actlimited="false", actdim=-1)  # fmt: skip
    return st



def actnum(el: Element) -> int:
    """Number of activation states of one actuator element (its defaults applied)."""
    st = resolve(el)
    return int(st["actdim"]) if int(st["actdim"]) >= 0 else int(int(st["dyntype"]) != DynType.NONE)


def resolve(el: Element) -> dict[str, Any]:
    """The fully resolved attributes of one actuator element (defaults chain applied)."""
    levels = [_builtin()]
    for d in el.defaults:
        levels.append(_apply(d, levels[-1], levels))
    return _apply(el, levels[-1], levels)


# ---------------------------------------------------------------------------------------------------- compile


def compile_actuator(root: Element, ctx: CompileContext) -> None:
    """Actuators -> ctx.arrays (actuator_*, jnt_actuatorid, tendon_actuatorid), ctx.sizes (nu, na)."""
    acts = section_children(root, "actuator")
    register_all(ctx, "actuator", acts)
    ctx.lengthrange_opts = lengthrange_options(root)
    nu = len(acts)
    al = autolimits(ctx)
    jnt_type = np.asarray(ctx.arrays.get("jnt_type", np.zeros(0, np.int32)))
    jnt_range = np.asarray(ctx.arrays.get("jnt_range", np.zeros((0, 2))))
    ten_limited = np.asarray(ctx.arrays.get("tendon_limited", np.zeros(0, bool)))
    ten_range = np.asarray(ctx.arrays.get("tendon_range", np.zeros((0, 2))))
    njnt = jnt_type.size
    ntendon = ten_limited.size

    out: dict[str, list] = {k: [] for k in _FIELDS}
    ctrl_limited: list[bool] = []
    ctrl_ranges: list[np.ndarray] = []
    actadr = ctrladr = outadr = nhistory = 0
    jnt_act = -np.ones(njnt, np.int32)
    ten_act = -np.ones(ntendon, np.int32)
    for i, el in enumerate(acts):
        st = resolve(el)
        al = autolimits(ctx, el)
        # ---- transmission (only from the actuator element itself)
        targets = [t for t in _TARGETS if el.attrs.get(t) is not None]
        if len(targets) != 1:
            raise error(el, "exactly one transmission target (joint, jointinparent, tendon, cranksite, site, body) "
                        f"is required, got {len(targets) or 'none'}")  # fmt: skip
        tgt = targets[0]
        name = el.attrs[tgt]
        trnid = [-1, -1]
        if tgt in ("joint", "jointinparent"):
            trntype = TrnType.JOINT if tgt == "joint" else TrnType.JOINTINPARENT
            trnid[0] = ctx.id_of("joint", name, el, tgt)
        elif tgt == "tendon":
            trntype = TrnType.TENDON
            trnid[0] = ctx.id_of("tendon", name, el, tgt)
        elif tgt == "cranksite":
            trntype = TrnType.SLIDERCRANK
            trnid[0] = ctx.id_of("site", name, el, tgt)
            if el.attrs.get("slidersite") is None:
                raise error(el, "slider-crank transmission requires slidersite", "slidersite")
            trnid[1] = ctx.id_of("site", el.attrs["slidersite"], el, "slidersite")
            if not st["cranklength"] > 0:
                raise error(el, "slider-crank transmission requires a positive cranklength", "cranklength")
        elif tgt == "site":
            trntype = TrnType.SITE
            trnid[0] = ctx.id_of("site", name, el, tgt)
            if el.attrs.get("refsite") is not None:
                trnid[1] = ctx.id_of("site", el.attrs["refsite"], el, "refsite")
        else:
            trntype = TrnType.BODY
            trnid[0] = ctx.id_of("body", name, el, tgt)
        if tgt != "cranksite" and (el.attrs.get("slidersite") is not None or _written(el, "cranklength")):
            raise error(el, "cranklength and slidersite can only be used in slidercrank transmission",
                        "slidersite" if el.attrs.get("slidersite") is not None else "cranklength")  # fmt: skip
        if tgt != "site" and el.attrs.get("refsite") is not None:
            raise error(el, "refsite can only be used with site transmission", "refsite")

        # ---- input block and activation
        dyntype = int(st["dyntype"])
        gaintype = int(st["gaintype"])
        so3 = int(st["gaintype"]) == GainType.SO3 or int(st["biastype"]) == BiasType.SO3
        if so3:
            trntype, ctrlspec, ctrlnum = _so3_block(el, st, trntype, trnid, jnt_type)
        else:
            ctrlspec, ctrlnum = _input_block(el, st, trntype)
        outnum = 3 if so3 else 1
        actdim = int(st["actdim"])
        if el.tag == "plugin":  # (MuJoCo checks the plugin's own count at init: `_plugin_actuator`)
            actnum = actdim if actdim >= 0 else int(dyntype != DynType.NONE)
        elif so3 and dyntype == DynType.INTEGRATOR:
            actnum = 3  # the orientation setpoint as an exponential-map vector
        elif dyntype == DynType.PID:
            nslot = int(st["dynprm"][1] > 0) + int(st["gainprm"][0] > 0)
            if actdim > 0 and actdim != nslot:
                raise error(el, "pid controller states require matching actdim", "actdim")
            actnum = nslot
        elif dyntype == DynType.DCMOTOR:
            nslot = int(np.sum(actuator_slots([dyntype], st["dynprm"], st["gainprm"]) >= 0))
            if actdim >= 0 and actdim != nslot:
                raise error(el, "inconsistent state array dimension in DC motor (actdim)", "actdim")
            actnum = nslot
            if not st["actearly"]:
                raise error(el, "actearly cannot be false for DC motor actuator", "actearly")
        elif actdim < 0:
            actnum = int(dyntype != DynType.NONE)
        else:
            actnum = actdim
            if actnum > 1 and dyntype != DynType.USER:
                raise error(el, "actdim > 1 is only allowed for dyntype 'user' and 'dcmotor'", "actdim")
            if actnum == 1 and dyntype == DynType.NONE:
                raise error(el, "invalid actdim 1 in stateless actuator", "actdim")
            if actnum == 0 and dyntype != DynType.NONE:
                raise error(el, "invalid actdim 0 in stateful actuator", "actdim")
        # ---- limits
        if so3 and dyntype == DynType.INTEGRATOR and st["actlimited"] == "true" and not np.any(st["actrange"]):
            st["actlimited"] = "false"  # (MuJoCo: the act setpoint is re-anchored at integration time instead)
        ctrllimited = _limited(st, "ctrllimited", "ctrlrange", al, el)
        forcelimited = _limited(st, "forcelimited", "forcerange", al, el)
        actlimited = _limited(st, "actlimited", "actrange", al, el)
        ctrlrange, actrange = np.array(st["ctrlrange"], float), np.array(st["actrange"], float)
        inherit = float(st["inheritrange"])
        position_like = st["biastype"] == BiasType.AFFINE and (
            (st["gaintype"] == GainType.FIXED and st["gainprm"][0] == -st["biasprm"][1])
            or st["gaintype"] == GainType.PID
        )
        if inherit > 0 and position_like:
            if dyntype not in (DynType.NONE, DynType.FILTEREXACT, DynType.PID, DynType.INTEGRATOR):
                raise error(el, "inheritrange only available for position and intvelocity actuators", "inheritrange")
            intvel = dyntype == DynType.INTEGRATOR
            if (st["explicit_actrange"] if intvel else st["explicit_ctrlrange"]) and np.any(
                actrange if intvel else ctrlrange
            ):
                raise error(el, f"{'actrange' if intvel else 'ctrlrange'} and inheritrange cannot both be defined",
                            "inheritrange")  # fmt: skip
            if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
                j = trnid[0]
                if jnt_type[j] not in (JointType.HINGE, JointType.SLIDE):
                    raise error(el, "inheritrange can only be used with hinge and slide joints", "inheritrange")
                rng = jnt_range[j]  # MuJoCo 4: the range counts even on an unlimited joint
            elif trntype == TrnType.TENDON:
                rng = ten_range[trnid[0]]
            else:
                raise error(el, "inheritrange can only be used with joint and tendon transmissions", "inheritrange")
            if not rng[0] < rng[1]:
                raise error(el, "inheritrange used but its target has no range defined", "inheritrange")
            mid, half = 0.5 * (rng[0] + rng[1]), 0.5 * (rng[1] - rng[0]) * inherit
            if intvel:
                actrange, actlimited = np.array([mid - half, mid + half]), True
            else:
                ctrlrange, ctrllimited = np.array([mid - half, mid + half]), True
        forcerange = np.array(st["forcerange"], float)
        if ctrllimited and not ctrlrange[0] < ctrlrange[1]:
            raise error(el, "invalid control range for actuator", "ctrlrange")
        if forcelimited and not forcerange[0] < forcerange[1]:
            raise error(el, "invalid force range for actuator", "forcerange")
        if so3 and forcelimited and forcerange[0] != 0:
            raise error(el, "so3 forcerange bounds the force norm, lower bound must be 0", "forcerange")
        if actlimited and not actrange[0] < actrange[1]:
            raise error(el, "invalid activation range for actuator", "actrange")
        if actlimited and dyntype == DynType.NONE:
            raise error(el, "actrange specified but dyntype is 'none' in actuator", "actrange")
        if el.tag in ("damper", "adhesion") and (ctrlrange[0] < 0 or ctrlrange[1] < 0):
            raise error(el, f"{el.tag} control range cannot be negative", "ctrlrange")
        if st["gaintype"] == GainType.MUSCLE:
            _check_muscle(st["gainprm"], el)
        if st["biastype"] == BiasType.MUSCLE:
            _check_muscle(st["biasprm"], el)
        lengthrange = np.array(st["lengthrange"], float)
        nsample, delay = max(int(st["nsample"]), 0), float(st["delay"])  # (MuJoCo: nsample < 0 is no buffer)
        if nsample > 1 << 24:
            raise error(el, f"at most 2^24 samples in history buffer, got {nsample}", "nsample")
        if delay > 0 and nsample == 0:
            raise error(el, "setting delay > 0 without a history buffer", "delay")
        if nsample and ctrlnum == 0:
            raise error(el, "history and delay require an input", "nsample")
        interp = st["interp"]
        if interp not in ("zoh", "linear", "cubic"):
            raise error(el, f"invalid keyword '{interp}' (expected zoh, linear or cubic)", "interp")

        # ---- armature / damping bookkeeping (jnt_actuatorid / tendon_actuatorid)
        armature = float(st["armature"])
        damping = np.array(st["damping"], float)
        if armature != 0 or np.any(damping != 0):  # (MuJoCo accepts a negative armature)
            if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
                jnt_act[trnid[0]] = i if jnt_act[trnid[0]] == -1 else -2
            elif trntype == TrnType.TENDON:
                ten_act[trnid[0]] = i if ten_act[trnid[0]] == -1 else -2
            elif trntype == TrnType.SO3:
                pass  # MuJoCo 4.0 stores them and applies neither to an so3 transmission (probed)
            else:
                raise error(el, "actuator armature and damping need a joint or tendon transmission",
                            "armature" if armature > 0 else "damping")  # fmt: skip

        out["actuator_trntype"].append(trntype)
        out["actuator_dyntype"].append(dyntype)
        out["actuator_gaintype"].append(int(st["gaintype"]))
        out["actuator_biastype"].append(int(st["biastype"]))
        out["actuator_trnid"].append(trnid)
        out["actuator_actadr"].append(actadr if actnum else -1)
        out["actuator_actnum"].append(actnum)
        actadr += actnum
        out["actuator_group"].append(int(st["group"]))
        climited, cranges = [ctrllimited] * ctrlnum, [ctrlrange] * ctrlnum
        if gaintype == GainType.PID:  # the vel and ff inputs have their own ranges (limited when lo < hi)
            j = 1 if ctrlspec & Input.POS else 0
            for bit, key in ((Input.VEL, "velrange"), (Input.FF, "ffrange")):
                if ctrlspec & bit:
                    r = np.array(st[key], float)
                    climited[j], cranges[j] = bool(r[0] < r[1]), r
                    j += 1
        ctrl_limited += climited
        ctrl_ranges += cranges
        out["actuator_forcelimited"].append(forcelimited)
        out["actuator_actlimited"].append(actlimited)
        out["actuator_actearly"].append(bool(st["actearly"]))
        out["actuator_dynprm"].append(st["dynprm"])
        out["actuator_gainprm"].append(st["gainprm"])
        out["actuator_biasprm"].append(st["biasprm"])
        out["actuator_forcerange"].append(forcerange)
        out["actuator_actrange"].append(actrange)
        out["actuator_gear"] += [st["gear"]] * outnum
        out["actuator_cranklength"].append(float(st["cranklength"]))
        out["actuator_lengthrange"] += [lengthrange] * outnum
        out["actuator_armature"].append(armature)
        out["actuator_damping"].append(damping[0])
        out["actuator_dampingpoly"].append(damping[1:])
        out["actuator_delay"].append(delay)
        out["actuator_history"].append([nsample, ("zoh", "linear", "cubic").index(interp)])  # (nsample, interp)
        out["actuator_historyadr"].append(nhistory if nsample else -1)
        nhistory += 2 + nsample * (1 + ctrlnum) if nsample else 0  # [user, cursor, times, control blocks]
        out["actuator_ctrladr"].append(ctrladr)
        out["actuator_ctrlnum"].append(ctrlnum)
        ctrladr += ctrlnum
        out["actuator_ctrlspec"].append(ctrlspec)
        out["actuator_outadr"].append(outadr)
        out["actuator_outnum"].append(outnum)
        outadr += outnum
        out["actuator_acc0"] += [0.0] * outnum
        out["actuator_length0"] += [0.0] * outnum
        prm, slots = _plugin_actuator(el, dyntype, actnum)
        out["actuator_pluginprm"].append(prm)
        out["actuator_pluginslot"].append(slots)

    shapes = {"actuator_trnid": (2,), "actuator_dynprm": (10,), "actuator_gainprm": (10,), "actuator_biasprm": (10,),
              "actuator_forcerange": (2,), "actuator_actrange": (2,),
              "actuator_gear": (6,), "actuator_lengthrange": (2,), "actuator_dampingpoly": (2,),
              "actuator_history": (2,), "actuator_pluginprm": (5,), "actuator_pluginslot": (2,)}  # fmt: skip
    for k, dtype in _FIELDS.items():
        ctx.arrays[k] = np.array(out[k], dtype=dtype).reshape((outadr if k in _PER_OUTPUT else nu,) + shapes.get(k, ()))
    ctx.arrays["actuator_ctrllimited"] = np.array(ctrl_limited, bool).reshape(ctrladr)
    ctx.arrays["actuator_ctrlrange"] = np.array(ctrl_ranges, np.float64).reshape(ctrladr, 2)
    ctx.arrays["jnt_actuatorid"] = jnt_act
    if "tendon_actuatorid" in ctx.arrays or ntendon:
        ctx.arrays["tendon_actuatorid"] = ten_act
    ctx.sizes["nu"] = ctrladr
    ctx.sizes["nactuator"] = nu
    ctx.sizes["nout"] = outadr
    ctx.sizes["na"] = actadr
    ctx.sizes["nhistory"] = nhistory  # (sensor buffers would follow the actuators'; sensors refuse them)


def _input_block(el: Element, st: dict, trntype: int) -> tuple[int, int]:
    """(actuator_ctrlspec, actuator_ctrlnum): the input signature resolved for the gain type, MuJoCo's checks."""
    spec = int(st["ctrlspec"])
    gt, bt, dt = int(st["gaintype"]), int(st["biastype"]), int(st["dyntype"])
    g, dp = st["gainprm"], st["dynprm"]
    servo = int(Input.POS | Input.VEL | Input.FF)
    if dt == DynType.PID and gt != GainType.PID:
        raise error(el, "dyntype 'pid' requires gaintype 'pid'", "dyntype")
    if gt == GainType.PID:
        if bt != BiasType.AFFINE:
            raise error(el, "pid requires biastype 'affine'", "biastype")
        if dt not in (DynType.NONE, DynType.PID):
            raise error(el, "pid requires dyntype 'none' or 'pid'", "dyntype")
        if dt == DynType.NONE and g[0]:
            raise error(el, "ki (gainprm[0]) requires dyntype 'pid'", "gainprm")
        if trntype == TrnType.BODY:
            raise error(el, "pid cannot use body transmission", "body")
        if dt == DynType.PID and (dp[0] < 0 or dp[1] < 0):
            raise error(el, "imax and slewmax (dynprm[0:2]) must be non-negative", "dynprm")
        spec = spec or int(Input.POS | Input.VEL)
        if spec & ~servo:
            raise error(el, "pid inputs are a subset of [pos, vel, ff]", "input")
        if dt == DynType.PID and not spec & Input.POS:
            raise error(el, "pid controller states require the pos input", "input")
        return spec, bin(spec).count("1")
    if gt == GainType.DCMOTOR:
        spec = spec or int(Input.VOLTAGE)
        if spec != Input.NONE and spec & ~(servo | Input.VOLTAGE):
            raise error(el, "dcmotor inputs are 'none' or a subset of [pos, vel, ff, voltage]", "input")
        controller = 0 if spec == Input.NONE else spec & servo
        if controller and g[1] <= 0:
            raise error(el, "dcmotor controller inputs require a positive motor constant", "motorconst")
        if not controller and (g[4] or g[5] or g[6]):
            raise error(el, "dcmotor controller gains require a controller input [pos, vel, ff]", "controller")
        if g[5] > 0 and not spec & Input.POS:
            raise error(el, "dcmotor integral gain requires the pos input", "controller")
        if not controller and dp[7] > 0:
            raise error(el, "dcmotor slew rate limiting requires a controller input [pos, vel, ff]", "controller")
        return spec, 0 if spec == Input.NONE else bin(spec).count("1")
    if spec and gt not in (GainType.FIXED, GainType.AFFINE):
        raise error(el, "input is only available for pid, dcmotor and fixed/affine gains", "input")
    return spec, 1


def _so3_block(el: Element, st: dict, trntype: int, trnid: list, jnt_type: np.ndarray) -> tuple[int, int, int]:
    """(trntype, ctrlspec, ctrlnum) of an so3 (orientation) actuator after MuJoCo's checks: so3 gain and bias
    together, dyntype none or integrator (expmap only), gainprm[0] == -biasprm[1], a ball joint or a site with a
    refsite; its transmission becomes TrnType.SO3 with 3 force outputs, its control block 3 (expmap) or 4 (quat)."""
    gt, bt, dt = int(st["gaintype"]), int(st["biastype"]), int(st["dyntype"])
    if gt != GainType.SO3 or bt != BiasType.SO3:
        raise error(el, "gaintype and biastype must both be 'so3'", "gaintype")
    if dt not in (DynType.NONE, DynType.INTEGRATOR):
        raise error(el, "so3 requires dyntype 'none' or 'integrator'", "dyntype")
    if st["gainprm"][0] != -st["biasprm"][1]:
        raise error(el, "so3 requires gainprm[0] == -biasprm[1]", "gainprm")
    if trntype == TrnType.SITE:
        if trnid[1] < 0:
            raise error(el, "so3 site transmission requires refsite", "refsite")
    elif trntype == TrnType.JOINT:
        if jnt_type[trnid[0]] != JointType.BALL:
            raise error(el, "so3 joint transmission requires a ball joint", "joint")
    else:
        raise error(el, "so3 requires site or ball joint transmission")
    if dt == DynType.INTEGRATOR and int(st["actdim"]) > 0 and int(st["actdim"]) != 3:
        raise error(el, "so3 integrator requires actdim 3", "actdim")
    spec = int(st["ctrlspec"]) or CHART_EXPMAP
    if spec == CHART_QUAT and dt != DynType.NONE:
        raise error(el, "so3 quat input requires dyntype 'none'", "input")
    if spec not in (CHART_EXPMAP, CHART_QUAT):
        raise error(el, "so3 input must be expmap or quat", "input")
    return TrnType.SO3, spec, 4 if spec == CHART_QUAT else 3


def _limited(st: dict, flag: str, rng: str, al: bool, el: Element) -> bool:
    proxy = Element(el.tag, {flag: st[flag], rng: st[rng]}, [], el.file, el.line)
    return resolve_limited(proxy, flag, rng, al, "actuator")


def _check_muscle(g, el: Element) -> None:
    """MuJoCo's checks of muscle gain or bias parameters (range, force, scale, lmin, lmax, vmax, fpmax, fvmax)."""
    if g[0] >= g[1]:
        raise error(el, "range[0]<range[1] required in muscle", "range")
    if g[4] >= 1 or g[5] <= 1:
        raise error(el, "lmin<1<lmax required in muscle", "lmin")
    if g[3] <= 0 or g[6] <= 0 or g[7] <= 0 or g[8] <= 0:
        raise error(el, "positive scale, vmax, fpmax, fvmax required in muscle", "vmax")


# fields with one row per force output (actuator_outadr / actuator_outnum), not per actuator
_PER_OUTPUT = ("actuator_gear", "actuator_lengthrange", "actuator_acc0", "actuator_length0")
_FIELDS = {
    "actuator_trntype": np.int32, "actuator_dyntype": np.int32, "actuator_gaintype": np.int32,
    "actuator_biastype": np.int32, "actuator_trnid": np.int32, "actuator_actadr": np.int32,
    "actuator_actnum": np.int32, "actuator_group": np.int32,
    "actuator_forcelimited": bool, "actuator_actlimited": bool, "actuator_actearly": bool,
    "actuator_dynprm": np.float64, "actuator_gainprm": np.float64, "actuator_biasprm": np.float64,
    "actuator_forcerange": np.float64, "actuator_actrange": np.float64,
    "actuator_gear": np.float64, "actuator_cranklength": np.float64, "actuator_lengthrange": np.float64,
    "actuator_armature": np.float64, "actuator_damping": np.float64, "actuator_dampingpoly": np.float64,
    "actuator_delay": np.float64, "actuator_history": np.int32, "actuator_historyadr": np.int32,
    "actuator_ctrladr": np.int32, "actuator_ctrlnum": np.int32, "actuator_ctrlspec": np.int32,
    "actuator_outadr": np.int32, "actuator_outnum": np.int32, "actuator_acc0": np.float64,
    "actuator_length0": np.float64, "actuator_pluginprm": np.float64, "actuator_pluginslot": np.int32,
}  # fmt: skip


def _plugin_actuator(el: Element, dyntype: int, actnum: int) -> tuple[np.ndarray, list[int]]:
    """(actuator_pluginprm row, actuator_pluginslot row) of one actuator: for a `mujoco.pid` plugin actuator its
    parameters (plugins.pid_parameters) and the act offsets of its integral and slew states (-1: none; MuJoCo's
    order: integral, slew, then the dyntype's state); zeros and -1 for other actuators. Raises MuJoCo's init error
    where actdim does not count those states."""
    use = el.attrs.get("plugin") if el.tag == "plugin" else None
    if use is None:
        return np.zeros(5), [-1, -1]
    name = use["instance"] or use["plugin"]
    prm, integral, slew = plugins.pid_parameters(el, name, use["config"])
    want = int(integral) + int(slew) + int(dyntype in (DynType.FILTER, DynType.FILTEREXACT, DynType.INTEGRATOR))
    if actnum != want:
        raise error(el, f"actuator has actdim {actnum}, expected {want}: add actdim=\"{want}\" to the actuator plugin "
                    "element (MuJoCo: plugin->init failed)", "actdim")  # fmt: skip
    return prm, [0 if integral else -1, int(integral) if slew else -1]


# ---------------------------------------------------------------------------------------------------- qpos0 constants

_LENGTHRANGE_DEFAULTS = dict(mode="muscle", useexisting=True, uselimit=False, accel=20.0, maxforce=0.0, timeconst=1.0,
                             timestep=0.01, inttotal=10.0, interval=2.0, tolrange=0.05)  # fmt: skip


def lengthrange_options(root: Element) -> dict[str, Any]:
    """Typed <compiler><lengthrange> settings (MuJoCo's defaults where absent)."""
    opts = dict(_LENGTHRANGE_DEFAULTS)
    for comp in root.find("compiler"):
        for lr in comp.find("lengthrange"):
            for k, v in lr.attrs.items():
                if v is None or k not in opts:
                    continue
                if k in ("useexisting", "uselimit") and not isinstance(v, (bool, np.bool_)):
                    v = str(v) == "true"
                opts[k] = v
    if opts["mode"] not in ("none", "muscle", "muscleuser", "all"):
        raise MJCFError(f"invalid lengthrange mode '{opts['mode']}'")
    return opts


def finalize_sections(ctx: CompileContext, st) -> None:
    """qpos0-dependent section constants (hook called by derived.set_const with its ConstState `st`).

    tendon_length0, tendon_invweight0 (J M^-1 J'), tendon_lengthspring (-1 -> length0), actuator_length0,
    actuator_acc0 (|M^-1 moment|), position-like gains with biasprm[2] > 0 read as a damping ratio
    (kv = dampratio * 2 sqrt(kp m), m = 1 / (J M^-1 J')), muscle lengthrange (mj_setLengthRange).
    """
    A, S = ctx.arrays, ctx.sizes
    nv, nt, nu = int(S["nv"]), int(S.get("ntendon", 0)), int(S.get("nactuator", 0))
    actuator_armature(ctx, st)
    minv = np.asarray(st.minv, np.float64)
    if nt:
        d = st.run(ptendon.tendon)
        tj = np.asarray(d.ten_J, np.float64).reshape(nt, nv)
        length0 = np.asarray(d.ten_length, np.float64).copy()
        A["tendon_length0"] = length0
        A["tendon_invweight0"] = np.sum((tj @ minv) * tj, axis=1) if nv else np.zeros(nt)  # J M^-1 J' (diagonal)
        ls = np.array(A["tendon_lengthspring"], np.float64)
        unset = (ls[:, 0] == -1) & (ls[:, 1] == -1)
        ls[unset] = _spring_lengths(ctx, st, length0)[unset, None]
        A["tendon_lengthspring"] = ls
    if not nu:
        return
    nout = int(S.get("nout", nu))
    outadr = np.asarray(A["actuator_outadr"])
    if S["njnt"]:
        d = st.run(transmission.transmission)
        mom = np.asarray(d.actuator_moment, np.float64).reshape(nout, nv)
        length = np.asarray(d.actuator_length, np.float64).copy()
    else:  # no joints (pipeline.transmission needs some): nothing moves; a tendon's length is its length0
        mom = np.zeros((nout, nv))
        tlen = np.asarray(A.get("tendon_length0", np.zeros(nt)), np.float64)
        length = np.zeros(nout)
        for i in range(nu):
            if A["actuator_trntype"][i] == TrnType.TENDON:
                length[outadr[i]] = tlen[A["actuator_trnid"][i, 0]]
            elif A["actuator_trntype"][i] == TrnType.SO3:
                raise NotImplementedError("mjx_lite: an orientation (so3) actuator in a model without joints")
    A["actuator_length0"] = length
    minv_mom = mom @ minv if nv else np.zeros((nout, 0))
    A["actuator_acc0"] = np.linalg.norm(minv_mom, axis=1)  # one per force output (moment row)
    gain = np.asarray(A["actuator_gainprm"], np.float64)
    bias = np.array(A["actuator_biasprm"], np.float64)
    for i in range(nu):
        pid = A["actuator_gaintype"][i] == GainType.PID
        so3 = A["actuator_gaintype"][i] == GainType.SO3
        if so3 and bias[i, 2] > 0:  # the mean inverse weight of the three moment rows (MuJoCo 4.0's reflected mass)
            rows = slice(outadr[i], outadr[i] + 3)
            w = float(np.mean(np.sum(minv_mom[rows] * mom[rows], axis=1))) if nv else 0.0
            mass = 1.0 / w if w > 0 else 0.0
            bias[i, 2] = -bias[i, 2] * 2.0 * np.sqrt(gain[i, 0] * mass)
        elif (((A["actuator_gaintype"][i] == GainType.FIXED and gain[i, 0] == -bias[i, 1]) or pid)
                and A["actuator_biastype"][i] == BiasType.AFFINE and bias[i, 2] > 0):  # fmt: skip
            o = outadr[i]
            w = float(minv_mom[o] @ mom[o]) if nv else 0.0
            mass = 1.0 / w if w > 0 else 0.0
            kp = -bias[i, 1] if pid else gain[i, 0]
            bias[i, 2] = -bias[i, 2] * 2.0 * np.sqrt(kp * mass)
    A["actuator_biasprm"] = bias
    _lengthrange(ctx, st)


def actuator_armature(ctx: CompileContext, st) -> None:
    """Add actuator armature (reflected through gear^2) to the qpos0 inertia `st.mfull`/`st.minv`, as MuJoCo's qM.

    Joint transmissions: armature * gear[0]^2 on each dof of the joint (ball: 3, free: 6); tendon transmissions:
    armature * gear[0]^2 * J' J on the dof-tree entries (as MuJoCo's qM). Skipped when the ConstState says it
    already holds it (`st.actuator_armature_included`).
    """
    A, S = ctx.arrays, ctx.sizes
    arm = np.asarray(A.get("actuator_armature", np.zeros(0)), np.float64)
    nv = int(S["nv"])
    if not np.any(arm) or not nv or getattr(st, "actuator_armature_included", False):
        return
    add = np.zeros((nv, nv))
    tj = None
    for i in np.nonzero(arm)[0]:
        trn, obj = int(A["actuator_trntype"][i]), int(A["actuator_trnid"][i, 0])
        g2 = float(A["actuator_gear"][A["actuator_outadr"][i], 0]) ** 2
        if trn in (TrnType.JOINT, TrnType.JOINTINPARENT):
            da, nd = int(A["jnt_dofadr"][obj]), JointType(int(A["jnt_type"][obj])).dof_width()
            add[np.arange(da, da + nd), np.arange(da, da + nd)] += arm[i] * g2  # every dof of the joint
        elif trn == TrnType.TENDON:
            if tj is None:
                tj = np.asarray(st.run(ptendon.tendon).ten_J, np.float64).reshape(-1, nv)
            add += arm[i] * g2 * np.outer(tj[obj], tj[obj])
    mfull = np.asarray(st.mfull, np.float64) + np.where(dof_tree_mask(ctx), add, 0.0)
    st.mfull = mfull
    st.lmat, st.dinv = factor_ld(mfull)  # MuJoCo's factorisation (pivots clamped to mjMINVAL: no singular error)
    st.minv = solve_ld(st.lmat, st.dinv, np.eye(nv))
    st.minv = 0.5 * (st.minv + st.minv.T)
    st.actuator_armature_included = True


def _lengthrange(ctx: CompileContext, st) -> None:
    """MuJoCo's mj_setLengthRange: limits of the target when `uselimit`, else the documented simulation."""
    A = ctx.arrays
    opts = ctx.lengthrange_opts or dict(_LENGTHRANGE_DEFAULTS)
    mode = opts["mode"]
    if mode == "none":
        return
    lr = np.array(A["actuator_lengthrange"], np.float64)
    outadr = np.asarray(A["actuator_outadr"])
    for i in range(len(outadr)):
        gt, bt = int(A["actuator_gaintype"][i]), int(A["actuator_biastype"][i])
        muscle = gt == GainType.MUSCLE or bt == BiasType.MUSCLE
        user = gt == GainType.USER or bt == BiasType.USER
        if not (mode == "all" or muscle or (mode == "muscleuser" and user)):
            continue
        o = int(outadr[i])
        if opts["useexisting"] and lr[o, 0] < lr[o, 1]:
            continue
        if gt == GainType.SO3:
            raise NotImplementedError(f"mjx_lite: <compiler><lengthrange mode='all'> on the orientation (so3) "
                                      f"actuator {i} is not supported")  # fmt: skip
        trn, obj = int(A["actuator_trntype"][i]), int(A["actuator_trnid"][i, 0])
        if opts["uselimit"]:
            rng = None
            if trn in (TrnType.JOINT, TrnType.JOINTINPARENT) and A["jnt_limited"][obj]:
                rng = np.asarray(A["jnt_range"][obj], np.float64)
            elif trn == TrnType.TENDON and A["tendon_limited"][obj]:
                rng = np.asarray(A["tendon_range"][obj], np.float64)
            if rng is not None:
                lr[o] = rng  # MuJoCo copies the target's range as is (gear not applied)
                continue
        lr[o] = _simulate_lengthrange(ctx, i, opts)
    A["actuator_lengthrange"] = lr


def _simulate_lengthrange(ctx: CompileContext, i: int, opts: dict) -> np.ndarray:
    """MuJoCo's documented length-range procedure (mj_setLengthRange) with our pipeline, for actuator i.

    Contacts, passive forces, gravity, frictionloss and actuation are disabled (joint/tendon limits and
    equalities stay on); from qpos0, for each side (min, max) the model is stepped for `inttotal` seconds at
    `timestep`, each step first damping qvel by exp(-dt / max(0.01, timeconst)) and then applying
    qfrc_applied = +-accel * moment / |M^-1 moment| (capped at `maxforce`); the actuator lengths of the steps
    ending in the last `interval` seconds give the side's extreme, and their spread must be within
    `tolrange` of the range.
    """
    el = ctx.elements["actuator"][i]
    o = int(ctx.arrays["actuator_outadr"][i])  # its (only) force output
    where = el.where() if el is not None else f"actuator {i}"
    dt = float(opts["timestep"]) if float(opts["timestep"]) > 0 else float(np.asarray(ctx.option["timestep"]))
    inttotal, interval = float(opts["inttotal"]), float(opts["interval"])
    # MuJoCo's loop: while time < inttotal: step; the time after each step decides what is recorded
    times = []
    t = 0.0
    while t < inttotal:
        t += dt
        times.append(t)
    record = np.array(times) > inttotal - interval
    flags = (DisableBit.FRICTIONLOSS | DisableBit.CONTACT | DisableBit.SPRING | DisableBit.DAMPER
             | DisableBit.GRAVITY | DisableBit.ACTUATION)  # fmt: skip
    decay = float(np.exp(-dt / max(0.01, float(opts["timeconst"]))))
    accel, maxforce = float(opts["accel"]), float(opts["maxforce"])
    with jax.enable_x64(True):
        m = provisional_model(ctx)
        m = m.replace(opt=m.opt.replace(disableflags=int(flags), timestep=jp.asarray(dt, m.opt.timestep.dtype)))
        d0 = io.make_data(m)

        def one(d, side):
            d = d.replace(qvel=d.qvel * decay)
            d = step.step1(m, d)
            moment = d.actuator_moment[o]
            nrm = jp.linalg.norm(inertia.solve_m(m, d, moment))
            f = moment * (2.0 * side - 1.0) * accel / jp.maximum(1e-15, nrm)
            if maxforce > 0:
                fn = jp.linalg.norm(f)
                f = jp.where(fn > maxforce, f * maxforce / jp.maximum(1e-15, fn), f)
            length = d.actuator_length[o]
            d = step.step2(m, d.replace(qfrc_applied=f))
            return d, (length, d.time)

        @jax.jit
        def run(side):
            return jax.lax.scan(lambda d, _: one(d, side), d0, None, length=len(times))[1]

        out = [run(jp.asarray(float(side))) for side in (0, 1)]
    res = np.zeros(2)
    spread = np.zeros(2)
    for side, (lengths, tim) in enumerate(out):
        lengths, tim = np.asarray(lengths), np.asarray(tim)
        if np.any(tim == 0):
            raise _lr_error(el, where, "unstable lengthrange simulation")
        sel = lengths[record]
        res[side] = sel.min() if side == 0 else sel.max()
        spread[side] = sel.max() - sel.min()
    dif = res[1] - res[0]
    if dif <= 0:
        raise _lr_error(el, where, f"invalid lengthrange ({res[0]:g}, {res[1]:g})")
    if np.any(spread > float(opts["tolrange"]) * dif):
        raise _lr_error(el, where, "lengthrange computation did not converge")
    return res


def _spring_lengths(ctx: CompileContext, st, length0: np.ndarray) -> np.ndarray:
    """Tendon lengths at qpos_spring (MuJoCo's setSpring); length0 when qpos_spring == qpos0."""
    qs = ctx.arrays.get("qpos_spring")
    if qs is None or np.array_equal(np.asarray(qs), np.asarray(ctx.arrays["qpos0"])):
        return length0

    def at_spring(m, d):
        d = kinematics.kinematics(m, d)
        d = kinematics.com_pos(m, d)
        return ptendon.tendon(m, d)

    with jax.enable_x64(True):
        d = st.d.replace(qpos=jp.asarray(np.asarray(qs, np.float64)))
        d = jax.jit(at_spring)(st.m, d)
    return np.asarray(d.ten_length, np.float64)


def _lr_error(el, where: str, msg: str) -> MJCFError:
    if el is None:
        return MJCFError(f"{where}: {msg}")
    name = el.attrs.get("name")
    return error(el, f"actuator{' ' + repr(name) if name else ''}: {msg}", "lengthrange")
