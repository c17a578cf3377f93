"""`coppelius inspect FILE`: what a host ELF, checkpoint, token stream or result record holds."""
from pathlib import Path

from .errors import CoppeliusError
from .formats import checkpoint, elf, result, tokens
from .weights import huggingface, llmc


def describe(path: str) -> list[str]:
    try:
        head = Path(path).open("rb").read(9)
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read ({e.strerror}); give an existing file")
    if head[:4] == b"\x7fELF":
        return [f"{path}: host ELF"] + elf.describe(path)
    if head[:8] == checkpoint.MAGIC:
        h = checkpoint.read_header(path)
        checkpoint.verify_payload(path, h)
        m = h["model"]
        return [f"{path}: checkpoint (header verified, payload verified: each against its sha256)",
                f"step {h['step']}, cursor {h['cursor']}, epoch {h['epoch']}",
                f"model: vocab {m['vocab']}, context {m['context']}, width {m['width']}, "
                f"{m['layers']} layers, {m['heads']} heads",
                f"learner: {', '.join(f'{k} {v}' for k, v in sorted(h['learner'].items()))}",
                f"payload: {h['payload_bytes']:,} bytes, sha256 {h['payload_sha256']}",
                f"header: sha256 {h['header_sha256']}"]
    if int.from_bytes(head[:4], "little") in (tokens.MAGIC, tokens.LLAMA3_MAGIC):  # the LLaMA-3 file: refused by name
        count = tokens.read_header(path)
        return [f"{path}: llm.c token stream", f"{count:,} tokens"]
    if int.from_bytes(head[:4], "little") == llmc.MAGIC:
        version, f = llmc.read_header(path)
        return [f"{path}: llm.c GPT-2 checkpoint, version {version} ({'fp32' if version == 3 else 'bf16'} parameters)",
                f"model: vocab {f['V']} (padded to {f['Vp']}), context {f['maxT']}, width {f['C']}, {f['L']} layers, "
                f"{f['NH']} heads"]
    if huggingface.is_safetensors(head):
        dims = huggingface.dimensions(path)
        return [f"{path}: safetensors", "as a GPT-2: " + ", ".join(f"{k} {v}" for k, (_, v) in dims.items())]
    if head[:1] == b"{":
        record = result.parse(path)
        kind = record.get("format") if isinstance(record, dict) else None
        if isinstance(kind, str) and kind != result.FORMAT:  # another format's JSON (a plan...), not a damaged record
            raise CoppeliusError(f"{path}: format is {kind!r}; inspect reads a host ELF, checkpoint, token stream, "
                                 f"result record or GPT-2 weights: give one of those")
        if isinstance(record, dict) and "format" not in record and "steps" not in record:  # config.json, say
            raise CoppeliusError(f"{path}: JSON with no format field (not a result record); inspect reads a host ELF, "
                                 f"checkpoint, token stream, result record or GPT-2 weights: give one of those")
        try:
            return _record_lines(path, result.check(path, record))
        except (KeyError, TypeError, ValueError) as e:  # read() checks what every reader needs, not all shown here
            raise CoppeliusError(f"{path}: the result record lacks or mistypes {e}; it is incomplete: run again to "
                                 f"write a whole one") from None
    raise CoppeliusError(f"{path}: starts with {head[:8]!r}, not a host ELF, checkpoint, token stream or result record "
                         f"(nor GPT-2 weights); give one of those")


def _record_lines(path, r: dict) -> list:
    lines = [f"{path}: result record ({r['operation']}, {r['status']})"]
    if r["steps"]:
        last = r["steps"][-1].get("tokens_per_second")  # an interrupted record has no run-wide rate yet
        rate = (f"{r['tokens_per_second']:,.0f} tokens/s" if isinstance(r.get("tokens_per_second"), (int, float))
                else f"{last:,.0f} tokens/s at the last step" if isinstance(last, (int, float))
                else "no tokens/s recorded")
        lines.append(f"steps {r['steps'][0]['t']}..{r['steps'][-1]['t']}: loss {r['steps'][0]['loss']:.4f} -> "
                     f"{r['steps'][-1]['loss']:.4f}, {r['skipped']} skipped, {rate}")
    if r.get("validation", {}).get("points"):
        points = r["validation"]["points"]
        lines.append(f"validation ({r['validation']['contexts']} contexts): " +
                     ", ".join(f"step {p['t']} loss {p['loss']:.4f}" for p in points))
    if r["operation"] == "train":
        lines.append(f"epochs: {r['epoch']} over {r['tokens']['count']:,} tokens")
    if r["predict"]:
        lines.append(f"predicted {len(r['predict'])} contexts, mean loss {r['mean_loss']:.4f}")
    return lines + [f"published: {p}" for p in r["published"]]
