#!/usr/bin/env python3
"""Reads the tracker files that write_tracker_files wrote, with decoders of its own, and compares
them with the values it logged (the same formulas as write_tracker_files.cpp):

- the TensorBoard events file: the TFRecord framing (uint64 length, masked CRC32C of the length, data,
  masked CRC32C of the data), every CRC checked with a bitwise CRC32C written here, and the protobuf
  wire format of the Event, Summary and Summary.Value messages decoded field by field;
- metrics.jsonl with Python's json module, and metrics.csv with its csv module.

    check_tracker_files.py WRITE_TRACKER_FILES
"""
import csv
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile


def crc32c(data):
    """The Castagnoli CRC, one bit at a time (the C++ side uses a table)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(data):
    """The payloads of a TFRecord file, each CRC checked."""
    out, pos = [], 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert length_crc == masked(crc32c(header)), f"record at {pos}: bad length CRC"
        payload = data[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert data_crc == masked(crc32c(payload)), f"record at {pos}: bad data CRC"
        out.append(payload)
        pos += 16 + length
    assert pos == len(data), "trailing bytes after the last record"
    return out


def varint(data, pos):
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(message):
    """(field number, wire type, value) of every field of a protobuf message."""
    out, pos = [], 0
    while pos < len(message):
        key, pos = varint(message, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(message, pos)
        elif wire == 1:
            value, pos = message[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = varint(message, pos)
            value, pos = message[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = message[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"wire type {wire} of field {number}")
        out.append((number, wire, value))
    assert pos == len(message), "a field runs past the message"
    return out


def event(payload):
    """An Event as a dict: wall_time, step, file_version, and summary values {tag: float or text}."""
    e = {"step": 0, "values": {}}
    for number, wire, value in fields(payload):
        if number == 1 and wire == 1:
            (e["wall_time"],) = struct.unpack("<d", value)
        elif number == 2 and wire == 0:
            e["step"] = value
        elif number == 3 and wire == 2:
            e["file_version"] = value.decode()
        elif number == 5 and wire == 2:
            for v_number, _, v in fields(value):
                assert v_number == 1, "Summary has only repeated Value value = 1"
                tag, scalar, text, plugin = None, None, None, None
                for f_number, f_wire, f in fields(v):
                    if f_number == 1:
                        tag = f.decode()
                    elif f_number == 2 and f_wire == 5:
                        (scalar,) = struct.unpack("<f", f)
                    elif f_number == 9:  # SummaryMetadata.plugin_data.plugin_name
                        plugin = fields(fields(f)[0][2])[0][2].decode()
                    elif f_number == 8:  # TensorProto: dtype 7 (DT_STRING), string_val = 8
                        tensor = {n: x for n, _, x in fields(f)}
                        assert tensor[1] == 7, "a text summary's tensor is DT_STRING"
                        text = tensor[8].decode()
                e["values"][tag] = scalar if text is None else (plugin, text)
        else:
            raise AssertionError(f"unexpected Event field {number}")
    return e


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected(step):
    values = {"loss": 1.0 / (step + 1), "lr": 0.001 * (step + 1)}
    if step >= 5:
        values["accuracy"] = step / 10.0
    if step == 9:
        values["a,b"] = 42
    return values


CONFIG = {"lr": 0.001, "model": "mlp", "hidden": 64}


def check_tensorboard(run_dir):
    files = glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
    assert len(files) == 1, f"expected one events file, found {files}"
    with open(files[0], "rb") as f:
        events = [event(p) for p in records(f.read())]
    assert events[0].get("file_version") == "brain.Event:2", events[0]
    plugin, text = events[1]["values"]["config"]
    assert plugin == "text"
    assert json.loads(text.strip("`\n")) == CONFIG, text
    scalars = events[2:]
    assert [e["step"] for e in scalars] == list(range(10)), [e["step"] for e in scalars]
    for e in scalars:
        want = {k: f32(v) for k, v in expected(e["step"]).items()}
        assert e["values"] == want, (e["step"], e["values"], want)
        assert e["wall_time"] > 1.6e9
    print(f"tensorboard: {len(events)} events, every CRC32C right, scalars as logged")


def check_jsonl(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert lines[0] == {"config": CONFIG}, lines[0]
    for step, record in enumerate(lines[1:]):
        assert record["step"] == step and record["values"] == expected(step), record
    assert len(lines) == 11
    print("jsonl: the config and 10 records as logged")


def check_csv(run_dir):
    with open(os.path.join(run_dir, "metrics.csv"), newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "loss", "lr", "accuracy", "a,b"], rows[0]
    for step, row in enumerate(rows[1:]):
        want = expected(step)
        assert int(row[0]) == step
        for name, cell in zip(rows[0][1:], row[1:]):
            if name in want:
                assert float(cell) == want[name], (step, name, cell)
            else:
                assert cell == "", (step, name, cell)
    assert len(rows) == 11
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f) == CONFIG
    print("csv: the header widened for accuracy and a,b; every value as logged")


def main():
    with tempfile.TemporaryDirectory() as root:
        subprocess.run([sys.argv[1], root], check=True)
        run_dir = os.path.join(root, "run")
        check_tensorboard(run_dir)
        check_jsonl(run_dir)
        check_csv(run_dir)
    print("PASS")


if __name__ == "__main__":
    main()
