"""What check_report.py and check_link_split.py share: running a tool, and
the models both check the JSON report on (zero-model-gen's MLP and a small
GPT-2, in bf16)."""
import subprocess
import sys

MODELS = {
    "mlp": ["mlp", "--sizes", "784,256,256,10", "--batch", "64"],
    "gpt2": ["gpt2", "--layers", "2", "--hidden", "64", "--heads", "4",
             "--vocab", "96", "--seq", "64", "--batch", "64"],
}


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return r.stdout


def models(model_gen):
    """Each model's name and IR, written by the zero-model-gen at
    model_gen."""
    for name, args in MODELS.items():
        yield name, run([model_gen] + args + ["--dtype", "bf16"])
