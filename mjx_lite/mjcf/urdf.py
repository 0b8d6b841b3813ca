"""URDF -> the MJCF spec tree, as MuJoCo's URDF reader builds it; then the usual compile.

`load_mjcf` / `load_mjcf_string` read a document whose root element is `<robot>` (any case, as MuJoCo) with this
reader. It writes the MJCF elements MuJoCo's reader creates (bodies, joints, geoms, meshes, mimic equalities) into
an MJCF element tree, each carrying the URDF file and line it comes from, and hands that tree to the MJCF builder
(`parse._build`), so URDF models get the same compiler, defaults and errors as MJCF. What MuJoCo's reader does:

- `<mujoco>` (a child of `<robot>`) may hold `<compiler>`, `<option>` and `<size>` with their MJCF meaning. URDF
  changes two compiler defaults: fusestatic and discardvisual are "true"; angles are always radians (a written
  `angle` is ignored). Unknown attributes and other children are ignored, as MuJoCo does (with a warning here).
- Links become bodies named after the link, in tree order (root links in document order, children in the order of
  the joints naming them); a link named "world" is the world body. Root links are fixed to the world (no free joint);
  with fusestatic they are fused into it.
- `<inertial>`: `<origin>` gives the inertial frame, `<mass value>` the mass, `<inertia ixx ... izz>` the full
  inertia in that frame (its principal frame composed with the origin's rotation); an all-zero inertia is unset.
  A link without `<inertial>` takes its inertia from its geoms (collision geoms; visual geoms have no mass).
- `<collision>` becomes a geom (contype = conaffinity = 1), `<visual>` a geom with contype = conaffinity = 0,
  group 1 and density 0, created only when discardvisual is "false". Shapes: box (size = full lengths), cylinder
  and capsule (radius, length), sphere, mesh (filename, scale: one mesh asset per file and scale, named after the
  file without directory and extension, numbered when the name repeats). A visual's material colour (its own
  `<color>`, or a named `<material>` with a `<color>` anywhere in the document) colours that visual geom and every
  later geom of the link.
- Joints: revolute and continuous -> hinge, prismatic -> slide, floating -> free, planar -> two slides and a
  hinge (name_TX, name_TY, name_RZ), spherical -> ball, fixed -> none. `<origin>` is the child body's pose,
  `<axis xyz>` the axis (default 1 0 0). `<limit lower upper>` -> range (limited unless the pair is incomplete,
  reversed or equal; continuous joints ignore it), `effort` -> actuatorfrcrange; `velocity` is not used.
  `<dynamics damping friction>` -> damping, frictionloss. `<mimic joint multiplier offset>` -> a joint equality
  (polycoef = offset, multiplier) when both joints are revolute, continuous or prismatic, else ignored (warning).
- Every element may appear once in its parent (MuJoCo: "repeated element"); required elements and attributes,
  numbers and joint types are checked with MuJoCo's rules; other elements and attributes are ignored.
"""

from __future__ import annotations

import warnings

import numpy as np

from mjx_lite.mjcf import inertia as inr
from mjx_lite.mjcf import parse, xml
from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.spec import Attr, Element, MJCFError, MJCFWarning

_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar", "spherical")
_MIMIC_TYPES = ("revolute", "continuous", "prismatic")
_SHAPES = ("box", "cylinder", "sphere", "capsule", "mesh")  # MuJoCo looks for them in this order


def is_urdf(root: xml.Node) -> bool:
    """True when the document's root element is a URDF <robot> (MuJoCo compares the name without case)."""
    return root.tag.lower() == "robot"


def _num(v) -> str:
    return repr(float(v))


def _vec(v) -> str:
    return " ".join(_num(x) for x in np.asarray(v, float).reshape(-1))


class _Reader:
    def __init__(self, root: xml.Node, file: str):
        self.root, self.file = root, file

    # -- MuJoCo's element and attribute readers -------------------------------------------------------------
    def err(self, msg: str, node: xml.Node, attribute: str | None = None) -> MJCFError:
        return MJCFError(msg, self.file, node.line, node.tag, attribute)

    def warn(self, msg: str, node: xml.Node) -> None:
        warnings.warn(f"{self.file}:{node.line}: {msg}", MJCFWarning, stacklevel=4)

    def sub(self, node: xml.Node, tag: str, required: bool = False) -> xml.Node | None:
        """The child with this tag; MuJoCo's "repeated element" / "missing element" errors."""
        found = [c for c in node.children if c.tag == tag]
        if len(found) > 1:
            raise self.err(f"repeated element: '{tag}'", found[1])
        if not found:
            if required:
                raise self.err(f"missing element: '{tag}'", node)
            return None
        return found[0]

    def text(self, node: xml.Node, name: str, required: bool = False) -> str | None:
        v = node.attrib.get(name)
        if v is None and required:
            raise self.err("required attribute missing", node, name)
        return v

    def reals(self, node: xml.Node, name: str, n: int, required: bool = False) -> np.ndarray | float | None:
        """n reals (a float for n = 1) read as MuJoCo reads numbers; an empty value counts as absent."""
        text = node.attrib.get(name)
        v = None
        if text is not None:
            raw = parse._Raw(node.tag, node.attrib, [], self.file, node.line)
            v = parse._convert(text, Attr("real", n), raw, name)
            if v is parse._ABSENT:
                v = None
        if v is None and required:
            raise self.err("required attribute missing", node, name)
        return v

    def raw(self, tag: str, node: xml.Node | None, attrib: dict[str, str], children=()) -> parse._Raw:
        line = node.line if node is not None else self.root.line
        return parse._Raw(tag, attrib, list(children), self.file, line)

    def origin(self, node: xml.Node) -> tuple[np.ndarray, np.ndarray]:
        """<origin xyz rpy> of `node`: position and the quaternion of the fixed-axis X, Y, Z rotations."""
        pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        o = self.sub(node, "origin")
        if o is not None:
            xyz = self.reals(o, "xyz", 3)
            if xyz is not None:
                pos = np.asarray(xyz, float)
            rpy = self.reals(o, "rpy", 3)
            if rpy is not None:
                raw = parse._Raw(o.tag, o.attrib, [], self.file, o.line)
                quat = parse.orientation_to_quat("euler", rpy, False, "XYZ", raw)
        return pos, quat

    # -- the document -------------------------------------------------------------------------------------------
    def build(self) -> tuple[parse._Raw, dict | None, tuple | None]:
        """The MJCF element tree (root <mujoco>), the world body's inertial (a link named "world" with an
        <inertial>) and its pose (a fixed joint whose child is "world"), which MJCF cannot write."""
        root = self.root
        sections = self.extension()
        self.materials: dict[str, str] = {}
        self.register_materials(root)
        links = [c for c in root.children if c.tag == "link"]
        joints = [c for c in root.children if c.tag == "joint"]
        names: list[str] = []
        for ln in links:
            name = self.text(ln, "name", required=True)
            if name in names:
                raise self.err(f"repeated URDF name: {name}", ln, "name")
            names.append(name)
        parent = {n: None for n in names}
        children: dict[str, list[str]] = {n: [] for n in names}
        for jn in joints:
            p = self.text(self.sub(jn, "parent", required=True), "link", required=True)
            c = self.text(self.sub(jn, "child", required=True), "link", required=True)
            if p not in parent or c not in parent:
                raise self.err("URDF joint parent or child missing", jn)
            if parent[c] is not None:
                raise self.err(f"URDF body has multiple parents: {c}", jn)
            parent[c] = p
            children[p].append(c)
        # bodies in tree order: raw <body> elements, filled by the link and joint passes below
        self.bodies: dict[str, parse._Raw] = {}
        self.order: dict[str, list] = {"world": []}  # body -> its child bodies (raw), in tree order
        link_node = dict(zip(names, links))

        def add(n: str, into: str):
            if n != "world":
                b = self.raw("body", link_node[n], {"name": n})
                self.bodies[n] = b
                self.order[into].append(b)
                self.order[n] = []
                into = n
            for c in children[n]:
                add(c, "world" if n == "world" else into)

        for n in names:
            if parent[n] is None:
                add(n, "world")
        self.parts: dict[str, dict[str, list]] = {n: {"inertial": [], "joint": [], "geom": []} for n in names}
        self.parts["world"] = {"inertial": [], "joint": [], "geom": []}
        self.meshes: dict[str, list[tuple[str, tuple, str]]] = {}  # base name -> [(file, scale, mesh name)]
        self.mesh_raws: list[parse._Raw] = []
        self.mesh_names: set[str] = set()
        self.geom_names: set[str] = set()
        self.discardvisual = sections["discardvisual"]
        self.strippath = sections["strippath"]
        world_inertial = None
        for ln in links:
            name = ln.attrib["name"]
            if name != "world" and name not in self.bodies:
                raise self.err("URDF body not found", ln)
            inertial = self.link(ln, name)
            if name == "world" and inertial is not None:
                world_inertial = inertial
        self.world_pose = None
        self.joint_types: dict[str, str] = {}
        self.joint_names: set[str] = set()
        mimics = []
        for jn in joints:
            m = self.joint(jn)
            if m is not None:
                mimics.append(m)
        equality = []
        for _, follower, jtype, mim in mimics:
            leader = self.text(mim, "joint", required=True)
            mult = self.reals(mim, "multiplier", 1)
            off = self.reals(mim, "offset", 1)
            if jtype not in _MIMIC_TYPES or self.joint_types.get(leader) not in _MIMIC_TYPES:
                self.warn(f"<mimic> on joint '{follower}' ignored; mimic requires revolute, continuous, or "
                          "prismatic joints", mim)  # fmt: skip
                continue
            coef = [0.0 if off is None else off, 1.0 if mult is None else mult, 0.0, 0.0, 0.0]
            equality.append(self.raw("joint", mim, {"joint1": follower, "joint2": leader, "polycoef": _vec(coef)}))
        # assemble
        def body_children(n: str) -> list:
            p = self.parts[n]
            return p["inertial"] + p["joint"] + p["geom"] + [fill(b) for b in self.order[n]]

        def fill(b: parse._Raw) -> parse._Raw:
            b.children = body_children(b.attrib["name"])
            return b

        world_children = self.parts["world"]["geom"] + [fill(b) for b in self.order["world"]]
        top = [sections["compiler"]] + sections["rest"]
        if self.mesh_raws:
            top.append(self.raw("asset", None, {}, self.mesh_raws))
        top.append(self.raw("worldbody", None, {}, world_children))
        if equality:
            top.append(self.raw("equality", None, {}, equality))
        attrib = {}
        model = self.text(root, "name")
        if model is not None:
            attrib["model"] = model
        return parse._Raw("mujoco", attrib, top, self.file, root.line), world_inertial, self.world_pose

    def extension(self) -> dict:
        """<mujoco><compiler/option/size>: MJCF elements with URDF's compiler defaults (unknown attributes and
        elements are ignored, as by MuJoCo)."""
        ext = self.sub(self.root, "mujoco")
        out = {"rest": []}
        comp = {"fusestatic": "true", "discardvisual": "true"}
        comp_children = []
        comp_node = None
        if ext is not None:
            for k in ext.children:
                if k.tag not in ("compiler", "option", "size"):
                    self.warn(f"<{k.tag}> in the URDF <mujoco> extension is ignored (MuJoCo reads only <compiler>, "
                              "<option> and <size> there)", k)  # fmt: skip
            for tag, kids in (("compiler", ("lengthrange",)), ("option", ("flag",)), ("size", ())):
                node = self.sub(ext, tag)
                if node is None:
                    continue
                attrib = self.known(node, tag)
                children = []
                for k in node.children:
                    if k.tag in kids:
                        children.append(self.raw(k.tag, k, self.known(k, f"{tag}/{k.tag}")))
                    else:
                        self.warn(f"<{k.tag}> in <{tag}> is ignored", k)
                if tag == "compiler":
                    comp.update(attrib)
                    comp_children, comp_node = children, node
                else:
                    out["rest"].append(self.raw(tag, node, attrib, children))
        comp["angle"] = "radian"  # MuJoCo's URDF reader: always radians
        out["compiler"] = self.raw("compiler", comp_node, comp, comp_children)
        # the two settings the reader itself uses (typed and checked as MJCF when the tree is built)
        for name in ("discardvisual", "strippath"):
            v = comp.get(name, "false")
            out[name] = v == "true"
        return out

    def known(self, node: xml.Node, key: str) -> dict[str, str]:
        schema = sc.SCHEMA.get(key, {})
        out = {}
        for name, v in node.attrib.items():
            if name in schema and name != "angle":
                out[name] = v
            elif name != "angle":
                self.warn(f"attribute '{name}' of <{node.tag}> is ignored (not an MJCF {key} attribute)", node)
        return out

    def register_materials(self, node: xml.Node) -> None:
        """Named materials with a colour, anywhere in the document (the first of a name wins)."""
        if node.tag == "material":
            name = self.text(node, "name")
            if name is not None and name not in self.materials:
                color = self.sub(node, "color")
                if color is not None:
                    self.materials[name] = _vec(self.reals(color, "rgba", 4, required=True))
        for c in node.children:
            self.register_materials(c)

    # -- links --------------------------------------------------------------------------------------------------
    def link(self, ln: xml.Node, name: str) -> dict | None:
        parts = self.parts[name]
        world_inertial = None
        node = self.sub(ln, "inertial")
        if node is not None:
            ipos, rquat = self.origin(node)
            mass = self.reals(self.sub(node, "mass", required=True), "value", 1, required=True)
            inode = self.sub(node, "inertia", required=True)
            full = np.array([self.reals(inode, k, 1, required=True) for k in ("ixx", "iyy", "izz", "ixy", "ixz",
                                                                              "iyz")])  # fmt: skip
            attrib = {"pos": _vec(ipos), "mass": _num(mass)}
            if not np.any(full != 0):  # all zero: no inertia given (the compiler's checks decide)
                attrib.update(quat=_vec(rquat), diaginertia="0 0 0")
            else:
                res = inr.principal_inertia(full)
                if res is None:  # the compiler reports MuJoCo's "inertia must have positive eigenvalues"
                    attrib["fullinertia"] = _vec(full)
                else:
                    attrib.update(quat=_vec(inr.quat_mul(rquat, res[1])), diaginertia=_vec(res[0]))
            if name == "world":
                world_inertial = {"node": node, "attrib": attrib}
            else:
                parts["inertial"].append(self.raw("inertial", node, attrib))
        rgba = None
        for el in ln.children:
            if el.tag == "visual":
                mat = self.sub(el, "material")
                if mat is not None:
                    color = self.sub(mat, "color")
                    if color is not None:
                        rgba = _vec(self.reals(color, "rgba", 4, required=True))
                    else:
                        mname = self.text(mat, "name", required=True)
                        rgba = self.materials.get(mname, rgba)
                if not self.discardvisual:
                    parts["geom"].append(self.geom(el, False, rgba))
            elif el.tag == "collision":
                parts["geom"].append(self.geom(el, True, rgba))
        return world_inertial

    def geom(self, node: xml.Node, collision: bool, rgba: str | None) -> parse._Raw:
        geometry = self.sub(node, "geometry", required=True)
        attrib = {"contype": "1", "conaffinity": "1"} if collision else {"contype": "0", "conaffinity": "0",
                                                                         "group": "1", "density": "0"}  # fmt: skip
        shape = None
        for tag in _SHAPES:
            shape = self.sub(geometry, tag)
            if shape is not None:
                break
        if shape is None:
            raise self.err("visual geometry specification not found", geometry)
        if shape.tag == "box":
            attrib.update(type="box", size=_vec(np.asarray(self.reals(shape, "size", 3, required=True)) / 2))
        elif shape.tag in ("cylinder", "capsule"):
            r = self.reals(shape, "radius", 1, required=True)
            length = self.reals(shape, "length", 1, required=True)
            attrib.update(type=shape.tag, size=_vec([r, length / 2]))
        elif shape.tag == "sphere":
            attrib.update(type="sphere", size=_num(self.reals(shape, "radius", 1, required=True)))
        else:
            attrib.update(type="mesh", mesh=self.mesh(shape))
        pos, quat = self.origin(node)
        attrib.update(pos=_vec(pos), quat=_vec(quat))
        if rgba is not None:
            attrib["rgba"] = rgba
        name = node.attrib.get("name", "")
        if name not in self.geom_names:
            self.geom_names.add(name)
            if name:
                attrib["name"] = name
        elif name:
            self.warn(f"geom with duplicate name '{name}' in URDF: the geom is unnamed", node)
        return self.raw("geom", node, attrib)

    def mesh(self, node: xml.Node) -> str:
        """The mesh asset of <mesh filename scale>: one per (file, scale), named after the file."""
        file = self.text(node, "filename", required=True)
        scale = self.reals(node, "scale", 3)
        scale = (1.0, 1.0, 1.0) if scale is None else tuple(float(x) for x in scale)
        if self.strippath:
            file = _strippath(file)
        base = _strippath(file)
        dot = base.rfind(".")
        base = base[:dot] if dot >= 0 else base
        same = self.meshes.setdefault(base, [])
        for f, s, n in same:
            if f == file and s == scale:
                return n
        name = base if not same else base + str(len(same))
        if name in self.mesh_names:
            k = 1
            while f"{name}_{k}" in self.mesh_names:
                k += 1
            name = f"{name}_{k}"
        same.append((file, scale, name))
        self.mesh_names.add(name)
        self.mesh_raws.append(self.raw("mesh", node, {"name": name, "file": file, "scale": _vec(scale)}))
        return name

    # -- joints -------------------------------------------------------------------------------------------------
    def joint(self, jn: xml.Node):
        """The joints of one URDF joint in its child body; returns (node, name, type, <mimic>) when it has one."""
        jtype = self.text(jn, "type", required=True)
        if jtype not in _JOINT_TYPES:
            raise self.err("invalid joint type in URDF joint definition", jn, "type")
        name = self.text(jn, "name", required=True)
        child = self.text(self.sub(jn, "child", required=True), "link", required=True)
        pos, quat = self.origin(jn)
        axis = np.array([1.0, 0.0, 0.0])
        an = self.sub(jn, "axis")
        if an is not None:
            axis = np.asarray(self.reals(an, "xyz", 3, required=True), float)
        if child == "world":
            if jtype != "fixed":
                raise self.err("joint found in world body", jn)
            self.world_pose = (pos, quat)  # MuJoCo writes the origin into the world body's (unused) frame
            return None
        body = self.bodies[child]
        body.attrib.update(pos=_vec(pos), quat=_vec(quat))
        self.joint_types.setdefault(name, jtype)
        if jtype == "fixed":
            return None
        made = []
        if jtype in ("revolute", "continuous", "prismatic", "spherical"):
            t = {"revolute": "hinge", "continuous": "hinge", "prismatic": "slide", "spherical": "ball"}[jtype]
            made.append((name, {"type": t, "axis": _vec(axis)}))
        elif jtype == "floating":
            made.append((name, {"type": "free"}))
        else:  # planar: slides along the x and y axes of the frame whose z axis is `axis`, a hinge about `axis`
            mat = inr.quat_to_mat(inr.z2quat(axis))
            made += [(name + "_TX", {"type": "slide", "axis": _vec(mat[:, 0])}),
                     (name + "_TY", {"type": "slide", "axis": _vec(mat[:, 1])}),
                     (name + "_RZ", {"type": "hinge", "axis": _vec(axis)})]  # fmt: skip
        dyn = self.sub(jn, "dynamics")
        if dyn is not None:
            damping = self.reals(dyn, "damping", 1)
            friction = self.reals(dyn, "friction", 1)
            for _, a in made:
                if damping is not None:
                    a["damping"] = _num(damping)
                if friction is not None:
                    a["frictionloss"] = _num(friction)
        lim = self.sub(jn, "limit")
        if lim is not None:
            lower = self.reals(lim, "lower", 1)
            upper = self.reals(lim, "upper", 1)
            effort = self.reals(lim, "effort", 1)
            a = made[0][1]
            if jtype == "continuous":
                a["limited"] = "false"
            elif lower is not None or upper is not None:
                rng = [0.0 if lower is None else lower, 0.0 if upper is None else upper]
                a["range"] = _vec(rng)
                if (lower is None) != (upper is None) or rng[0] > rng[1]:
                    a["limited"] = "false"
                elif rng[0] == rng[1]:
                    self.warn(f"joint '{name}' has equal lower and upper limits, limit ignored", lim)
                    a["limited"] = "false"
            if effort is not None and abs(effort) > 0:
                a["actuatorfrcrange"] = _vec([-abs(effort), abs(effort)])
        parts = self.parts[child]["joint"]
        for jname, a in made:
            if jname not in self.joint_names:  # MuJoCo leaves a repeated joint name unset
                self.joint_names.add(jname)
                a["name"] = jname
            parts.append(self.raw("joint", jn, a))
        mim = self.sub(jn, "mimic")
        if mim is not None:
            return jn, name, jtype, mim
        return None


def _strippath(name: str) -> str:
    """The file name without its directories (mjuu_strippath)."""
    cut = max(name.rfind("/"), name.rfind("\\"))
    return name[cut + 1 :]


def build(root: xml.Node, file: str) -> Element:
    """The spec tree of a URDF document (root <robot>): MJCF elements as MuJoCo's URDF reader makes them, then
    the MJCF builder (defaults, typed values, checks)."""
    raw, world_inertial, world_pose = _Reader(root, file).build()
    tree = parse._build(raw)
    wb = next(s for s in tree.children if s.tag == "worldbody")
    if world_pose is not None:
        wb.attrs.update(pos=world_pose[0], quat=world_pose[1])
    if world_inertial is not None:  # the world link's inertial: MuJoCo keeps it on the world body
        node, attrib = world_inertial["node"], world_inertial["attrib"]
        attrs = dict(parse._BUILTIN["inertial"])
        w = parse._written(parse._Raw("inertial", attrib, [], file, node.line), "inertial")
        attrs.update(w)
        wb.children.insert(0, Element("inertial", attrs, [], file, node.line, set(w)))
    return tree
