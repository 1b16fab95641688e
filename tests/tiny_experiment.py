"""Prints the tiny MoE experiment the shell test suites train (a fraction of a second per step on
one core): `python3 tests/tiny_experiment.py DIR [section.key=VALUE ...]`. Runs go to DIR/runs, data
is read from DIR/data (what `moetrain prepare --out DIR/data` writes), the device is the strict CPU
backend; each override's VALUE is a TOML value ('"text"', 3, 1e-3, true)."""
import json
import sys
import tomllib


def base(work):
    return {
        "run": {"out_dir": f"{work}/runs"},
        "model": {"d_model": 16, "n_layers": 2, "n_heads": 2, "head_dim": 8, "ffn_hidden": 32, "seq_len": 8,
                  "moe": {"n_routed_experts": 4, "expert_hidden": 16}},
        "data": {"train": f"{work}/data/train_*.bin", "val": f"{work}/data/val_*.bin"},
        "training": {"steps": 4, "global_batch": 4, "micro_batch": 2, "eval_every": 2, "eval_sequences": 2},
        "lr_schedule": {"warmup_steps": 1},
        "precision": {"device": "cpu-strict"},
    }


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def write(table, prefix, out):
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    if prefix and scalars:
        out.append(f"[{prefix}]")
    out.extend(f"{k} = {toml_value(v)}" for k, v in scalars.items())
    for k, v in table.items():
        if isinstance(v, dict):
            write(v, f"{prefix}.{k}" if prefix else k, out)


def main():
    exp = base(sys.argv[1])
    for override in sys.argv[2:]:
        key, _, value = override.partition("=")
        *tables, name = key.split(".")
        at = exp
        for t in tables:
            at = at.setdefault(t, {})
        at[name] = tomllib.loads(f"v = {value}")["v"]
    out = []
    write(exp, "", out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
