"""Random `.stm` machines for a differential run of our validator / renderer / parser
against harel (not part of the committed golden cases).

    "$STM_PYTHON" shared/core/tests/data/validate/fuzzgen.py DIR COUNT [FIRST_SEED]
    "$STM_PYTHON" shared/core/tests/data/validate/gen.py --cases DIR
    STM_VALIDATE_CASES=DIR cargo test -p stm-core --test validate_golden --test render_golden

It writes `DIR/f<seed>.stm` and keeps those harel loads. The machines mix nested and
orthogonal states, finals, invokes, timeouts, typed events and context, guards, `set`,
`choose`, `select` and `join`, with deliberate defects (undeclared events and fields,
bad defaults, `ttl 0`, unresolved selector targets, ...). Each transition reads at most
one undeclared event field, so harel's findings don't depend on the hash seed.
"""

import random
import sys
from pathlib import Path

TYPES = ["int", "string", "bool", "float", "any"]
OPS = ["==", "!=", "<", "<=", ">", ">=", "in"]

def lit(r, ty=None):
    ty = ty or r.choice(TYPES)
    if ty == "int": return str(r.randint(-2, 5))
    if ty == "float": return r.choice(["1.5", "0.25", "2.0", "1e-05"])
    if ty == "bool": return r.choice(["true", "false"])
    if ty == "string": return r.choice(['"a"', '"b:c"', '"x y"'])
    return r.choice(['[1, "a"]', '[]', '3'])

class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.counter = 0
    def name(self, p="S"):
        self.counter += 1
        return f"{p}{self.counter}"

    def machine(self):
        r = self.r
        out = []
        self.fields = ["f0", "f1", "f2"]
        self.events = []
        for i in range(r.randint(1, 4)):
            e = f"E{i}"
            self.events.append(e)
            if r.random() < 0.3:
                out.append(f"event {e} {{}}")
            else:
                fs = " ".join(f"{f}: {r.choice(TYPES)}{'?' if r.random()<0.2 else ''}" for f in self.fields)
                out.append(f"event {e} {{ {fs} }}")
        self.ctx = []
        body = []
        if r.random() < 0.6:
            cf = []
            for i in range(r.randint(1, 3)):
                ty = r.choice(TYPES)
                self.ctx.append(f"c{i}")
                d = f" = {lit(r, ty if r.random() < 0.8 else None)}" if r.random() < 0.6 else ("?" if r.random() < 0.3 else "")
                cf.append(f"c{i}: {ty}{d}")
            body.append("context { " + " ".join(cf) + " }")
        else:
            self.ctx = ["c0"]
        if r.random() < 0.3:
            body.append(f"ttl {r.choice([0, 60])}")
        body += self.scope(depth=0, region=False)
        out.append("machine M {\n" + "\n".join("  " + l for l in body) + "\n}")
        return "\n".join(out) + "\n"

    def pred(self, depth=0, allow_event=True):
        r = self.r
        k = r.random()
        if depth < 2 and k < 0.15:
            return f"{self.pred(depth+1, allow_event)} and {self.pred(depth+1, allow_event)}"
        if depth < 2 and k < 0.25:
            return f"({self.pred(depth+1, allow_event)} or {self.pred(depth+1, allow_event)})"
        if depth < 2 and k < 0.3:
            return f"not {self.pred(depth+1, allow_event)}"
        left = r.choice(["ev", "ctx"] if allow_event else ["ctx", "ctx", "ev"])
        if left == "ev":
            f = r.choice(self.fields + ["zz"] if self.allow_unknown else self.fields)
            if f == "zz": self.allow_unknown = False
            lhs = r.choice([f, f"event.{f}"])
        else:
            lhs = f"context.{r.choice(self.ctx + ['cq'])}"
        op = r.choice(OPS)
        if r.random() < 0.3:
            rhs = r.choice([f"context.{r.choice(self.ctx)}", f"event.{r.choice(self.fields)}"])
        else:
            rhs = lit(r)
        return f"{lhs} {op} {rhs}"

    def assigns(self):
        r = self.r
        parts = []
        for _ in range(r.randint(1, 2)):
            def operand():
                return r.choice([f"context.{r.choice(self.ctx + ['cq'])}", f"event.{r.choice(self.fields)}", lit(r)])
            rhs = operand() if r.random() < 0.5 else f"{operand()} {r.choice('+-*/')} {operand()}"
            parts.append(f"context.{r.choice(self.ctx + ['cw'])} = {rhs}")
        return "set " + ", ".join(parts)

    def trigger(self):
        r = self.r
        kinds = r.sample(self.events + ["Timeout", "Cancel", "Expired", "Finished", "Undeclared", "Returned"], r.randint(1, 2))
        t = "on " + " | ".join(kinds)
        if r.random() < 0.4:
            t += " where " + self.pred()
        return t

    def scope(self, depth, region):
        r = self.r
        lines = []
        children = []
        self.stack = getattr(self, "stack", [])
        self.stack.append(children)
        n = r.randint(1, 4) if depth < 3 else r.randint(1, 2)
        for _ in range(n):
            kind = r.random()
            nm = self.name()
            children.append(nm)
            attrs = []
            if r.random() < 0.2:
                attrs.append(f"timeout {r.choice(['5', '0', 'context c0'])}")
            if r.random() < 0.1:
                attrs.append("on enter pkg.mod.enter")
            if r.random() < 0.1:
                attrs.append("on activity pkg.act")
            if r.random() < 0.05:
                attrs.append("outcome weird")
            if r.random() < 0.05:
                attrs.append("with { a: c0 }")
            if depth < 3 and kind < 0.2:
                sub = self.scope(depth + 1, False)
                lines.append(f"state {nm} {{")
                lines += ["  " + l for l in attrs + sub]
                lines.append("}")
            elif depth < 3 and kind < 0.3:
                lines.append(f"orthogonal {nm} {{")
                for a in attrs: lines.append("  " + a)
                for _ in range(r.randint(1, 3)):
                    rn = self.name("R")
                    sub = self.scope(depth + 2, True)
                    lines.append(f"  state {rn} {{")
                    lines += ["    " + l for l in sub]
                    lines.append("  }")
                lines.append("}")
                self.orth = getattr(self, "orth", []) + [nm]
            elif kind < 0.45:
                lines.append(f"final {nm} {r.choice(['success', 'failed'])}")
            elif kind < 0.52:
                inv = r.choice(["invoke Child", "invoke Child for x in c0", "invoke Child with { a: c0 }"])
                lines.append(f"state {nm} {{ {inv} {' '.join(attrs)} }}")
            else:
                lines.append(f"state {nm} {{ {' '.join(attrs)} }}")
        if r.random() < 0.9:
            lines.insert(0, f"initial {r.choice(children) if r.random() < 0.95 else 'Nope'}")
        # transitions
        targets = [n for level in self.stack for n in level]
        for _ in range(r.randint(0, 5)):
            src = r.choice(children)
            self.allow_unknown = True
            k = r.random()
            tgt = r.choice(targets)
            if k < 0.5:
                t = f"from {src} to {tgt}"
                if r.random() < 0.75: t += " " + self.trigger()
                if r.random() < 0.25: t += " " + self.assigns()
            elif k < 0.7:
                auto = r.random() < 0.5
                trig = "" if auto else " " + self.trigger()
                brs = " ".join(f"when {self.pred(allow_event=not auto or r.random()<0.2)} to {r.choice(targets)}" + (f" {self.assigns()}" if r.random() < 0.2 else "") for _ in range(r.randint(1, 2)))
                els = f" else to {r.choice(targets)}" if r.random() < 0.5 else ""
                st = f" {self.assigns()}" if r.random() < 0.2 else ""
                t = f"from {src} choose{trig}{st} {{ {brs}{els} }}"
            elif k < 0.85:
                vals = r.sample(['"a"', '"b"', '"c"', '1', 'true'], r.randint(1, 3))
                pool = ['"a"', '"b"', '"c"', '1', 'true']
                picked = ", ".join(r.sample(pool, 2))
                ret = f" returns {{ {picked} }}" if r.random() < 0.5 else ""
                trig = " " + self.trigger() if r.random() < 0.5 else ""
                brs = " ".join(f"{v} to {r.choice(targets + ['Ghost'] if r.random()<0.1 else targets)}" for v in vals)
                els = f" else to {r.choice(targets)}" if r.random() < 0.4 else ""
                t = f"from {src} select pkg.pick{ret}{trig} {{ {brs}{els} }}"
            else:
                t = f"from {src} join {r.choice(['all', 'any'])} to {r.choice(targets)} else to {r.choice(targets)}"
            lines.append(t)
        self.stack.pop()
        return lines

def main():
    out = Path(sys.argv[1]); n = int(sys.argv[2]); base = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    from harel.dsl import definition_from_dsl_file
    ok = 0
    for seed in range(base, base + n):
        g = Gen(seed)
        text = g.machine()
        p = out / f"f{seed}.stm"
        p.write_text(text)
        try:
            definition_from_dsl_file(p, "M")
            ok += 1
        except Exception:
            p.unlink()
    print(ok, "loadable of", n)

if __name__ == "__main__":
    main()
