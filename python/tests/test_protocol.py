# SPDX-License-Identifier: MIT
"""The package against protocol/PROTOCOL.md itself, with no daemon: the worked
example's bytes, the error and type tables, the LIST example, and how frames
of each kind are laid out for the wire.

Tables are read from PROTOCOL.md at test time, so a status code or message type
added to the contract and not to the package fails here.
"""

import json
import os
import re
import struct
import unittest

import numpy as np

import gpuframe
from gpuframe import errors, protocol
from gpuframe.pipelines import REFUSED, Pipeline, Pipelines, encode_frame
from gpuframe.protocol import MsgType, Status

import support

PROTOCOL_MD = os.path.join(support.REPO, "protocol", "PROTOCOL.md")


def read_doc():
    with open(PROTOCOL_MD, encoding="utf-8") as f:
        return f.read()


def hex_blocks(doc):
    """Every fenced block of the document whose lines are hex byte dumps, as
    (bytes, the block's other lines)."""
    blocks = []
    for body in re.findall(r"^```[^\n]*\n(.*?)^```", doc, re.S | re.M):
        data, other = bytearray(), []
        for line in body.splitlines():
            if re.fullmatch(r"(?:[0-9A-F]{2}\s*)+", line.strip()):
                data += bytes.fromhex(line)
            else:
                other.append(line)
        if data:
            blocks.append((bytes(data), other))
    return blocks


class WorkedExampleTest(unittest.TestCase):
    """PROTOCOL.md, "Worked example", byte for byte."""

    @classmethod
    def setUpClass(cls):
        cls.blocks = [b for b, _ in hex_blocks(read_doc()) if b[:4] == b"GFRM"]

    def test_frame_header_encodes_to_the_documented_bytes(self):
        self.assertIn(protocol.encode_header(MsgType.FRAME, 7, 1, 16), self.blocks)
        self.assertEqual(protocol.encode_header(MsgType.FRAME, 7, 1, 16).hex(),
                         "4746524d010100000700000000000000"
                         "01000000000000001000000000000000")

    def test_encode_header_into_writes_at_the_offset(self):
        buf = bytearray(40)
        protocol.encode_header_into(buf, 8, MsgType.FRAME, 7, 1, 16)
        self.assertEqual(bytes(buf[8:]), protocol.encode_header(MsgType.FRAME, 7, 1, 16))
        self.assertEqual(bytes(buf[:8]), bytes(8))

    def test_result_decodes_to_2x_plus_1(self):
        # The worked example's RESULT (version 1); the shared-memory example
        # has a version-2 one.
        (block,) = [b for b in self.blocks if b[5] == MsgType.RESULT and b[4] == 1]
        h = protocol.decode_header(block)
        self.assertEqual(h, protocol.Header(1, MsgType.RESULT, 0, 7, 1, 0, 16))
        values = np.frombuffer(block, "<f4", offset=32)
        np.testing.assert_array_equal(values, np.float32([3.0, 5.0, 0.0, 1.0]))

    def test_error_decodes_to_unknown_pipeline(self):
        (block,) = [b for b in self.blocks if b[5] == MsgType.ERROR]
        h = protocol.decode_header(block)
        self.assertEqual(h, protocol.Header(1, MsgType.ERROR, 0, 8, 9, 6, 25))
        self.assertEqual(len("pipeline 9 does not exist"), h.payload_bytes)
        e = errors.make_status_error(h.status, "pipeline 9 does not exist",
                                     frame_id=h.frame_id, pipeline_id=h.pipeline_id)
        self.assertIsInstance(e, gpuframe.UnknownPipelineError)
        self.assertEqual((e.status, e.name, e.fatal, e.frame_id, e.pipeline_id),
                         (6, "unknown_pipeline", False, 8, 9))
        self.assertEqual(str(e), "unknown_pipeline (status 6): pipeline 9 does not exist")


class ShmExampleTest(unittest.TestCase):
    """PROTOCOL.md, "Shared-memory frames (version 2)", "Example", byte for byte."""

    @classmethod
    def setUpClass(cls):
        cls.blocks = [b for b, _ in hex_blocks(read_doc()) if b[:5] == b"GFRM\x02"]

    def block(self, msg_type):
        (block,) = [b for b in self.blocks if b[5] == msg_type]
        return block

    def test_the_document_was_read(self):
        self.assertEqual(sorted(b[5] for b in self.blocks),
                         [MsgType.FRAME, MsgType.RESULT, MsgType.REGION_ADD, MsgType.REGION_ADD])

    def test_region_add_request_and_reply(self):
        request, reply = sorted((b for b in self.blocks if b[5] == MsgType.REGION_ADD), key=len)
        self.assertEqual(protocol.encode_header(MsgType.REGION_ADD, 0, 0, 0, version=2), request)
        h = protocol.decode_header(reply)
        self.assertEqual(h, protocol.Header(2, MsgType.REGION_ADD, 0, 0, 0, 0, 16))
        info = protocol.decode_region_info(reply[32:])
        self.assertEqual(info, protocol.RegionInfo(1, protocol.REGION_PINNED, 1 << 20))

    def test_frame_by_reference(self):
        block = self.block(MsgType.FRAME)
        header = protocol.encode_header(MsgType.FRAME, 9, 0, protocol.SHM_FRAME_BYTES,
                                        flags=protocol.FLAG_SHM, version=2)
        desc = protocol.encode_shm_frame(1, 0, 4096, 524288, 4096)
        self.assertEqual(header + desc, block)

    def test_its_result(self):
        block = self.block(MsgType.RESULT)
        h = protocol.decode_header(block)
        self.assertEqual(h, protocol.Header(2, MsgType.RESULT, protocol.FLAG_SHM, 9, 0, 0, 24))
        self.assertEqual(protocol.decode_shm_result(block[32:]),
                         protocol.ShmResult(1, 524288, 4096))

    def test_descriptor_fields_and_reserved_bytes(self):
        d = protocol.encode_shm_frame(7, 1, 2, 3, 4, reserved=5)
        self.assertEqual(len(d), protocol.SHM_FRAME_BYTES)
        self.assertEqual(d[4:8], bytes([5, 0, 0, 0]))
        with self.assertRaises(struct.error):
            protocol.encode_shm_frame(1, 1 << 64, 0, 0, 0)
        bad = bytearray(self.block(MsgType.RESULT)[32:])
        bad[5] = 1
        with self.assertRaisesRegex(gpuframe.ProtocolError, "reserved bytes 0x00000100"):
            protocol.decode_shm_result(bytes(bad))



class DeviceExampleTest(unittest.TestCase):
    """PROTOCOL.md, "Device frames (version 4)", "Example", byte for byte."""

    @classmethod
    def setUpClass(cls):
        cls.blocks = [b for b, _ in hex_blocks(read_doc()) if b[:5] == b"GFRM\x04"]

    def test_the_document_was_read(self):
        self.assertEqual(sorted(b[5] for b in self.blocks),
                         [MsgType.FRAME, MsgType.DEVICE_REGION_ADD, MsgType.DEVICE_REGION_ADD])

    def test_device_region_add_and_reply(self):
        request, reply = [b for b in self.blocks if b[5] == MsgType.DEVICE_REGION_ADD]
        self.assertEqual(protocol.encode_header(MsgType.DEVICE_REGION_ADD, 0, 0,
                                                protocol.DEVICE_REGION_BYTES, version=4)
                         + protocol.encode_device_region(2 << 20), request)
        h = protocol.decode_header(reply)
        self.assertEqual(h, protocol.Header(4, MsgType.DEVICE_REGION_ADD, 0, 0, 0, 0, 16))
        self.assertEqual(protocol.decode_region_info(reply[32:]),
                         protocol.RegionInfo(1, protocol.REGION_DEVICE, 2 << 20))

    def test_device_frame(self):
        (block,) = [b for b in self.blocks if b[5] == MsgType.FRAME]
        header = protocol.encode_header(MsgType.FRAME, 5, 1, protocol.SHM_FRAME_BYTES,
                                        flags=protocol.FLAG_DEVICE, version=4)
        self.assertEqual(header + protocol.encode_shm_frame(1, 0, 4096, 1 << 20, 4096), block)


class TablesTest(unittest.TestCase):
    """The package's codes and names are PROTOCOL.md's tables."""

    @classmethod
    def setUpClass(cls):
        doc = read_doc()
        errors_part = doc[doc.index("## Errors"):doc.index("## Pipelines")]
        cls.statuses = {
            int(code): (name, fatal)
            for code, name, fatal in re.findall(
                r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|\s*(yes|no\\\*|no|–)\s*\|", errors_part, re.M)
        }
        types_part = doc[doc.index("## Message types"):doc.index("### FRAME")]
        cls.types = {
            int(code): name
            for code, name in re.findall(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|", types_part, re.M)
        }

    def test_the_document_was_read(self):
        self.assertEqual(len(self.statuses), 22)
        self.assertEqual(len(self.types), 9)

    def test_every_status_code_and_name(self):
        self.assertEqual({s.value: s.name.lower() for s in Status},
                         {code: name for code, (name, _) in self.statuses.items()})
        for code, (name, _) in self.statuses.items():
            self.assertEqual(protocol.status_name(code), name)
        self.assertEqual(protocol.status_name(22), "unknown")
        self.assertEqual(protocol.status_name(0xFFFFFFFF), "unknown")

    def test_fatal_statuses(self):
        self.assertEqual(set(protocol.FATAL_STATUSES),
                         {c for c, (_, fatal) in self.statuses.items() if fatal == "yes"})

    def test_every_message_type(self):
        self.assertEqual({t.value: t.name for t in MsgType},
                         {code: name for code, name in self.types.items()})

    def test_one_exception_class_per_error_status(self):
        seen = set()
        for code, (name, fatal) in self.statuses.items():
            if code == 0:
                continue
            cls = errors.status_error_class(code)
            self.assertNotIn(cls, seen)
            seen.add(cls)
            self.assertEqual((cls.STATUS, cls.NAME), (code, name))
            self.assertEqual(issubclass(cls, gpuframe.FatalStatusError), fatal == "yes", name)
            e = errors.make_status_error(code, "why", frame_id=3, pipeline_id=4)
            self.assertIsInstance(e, cls)
            self.assertIsInstance(e, gpuframe.StatusError)
            self.assertIsInstance(e, gpuframe.GpuframeError)
            self.assertEqual((e.status, e.name, e.text, e.fatal, e.frame_id, e.pipeline_id),
                             (code, name, "why", fatal == "yes", 3, 4))
            self.assertIs(getattr(gpuframe, cls.__name__), cls)

    def test_unknown_status_is_a_failure_of_one_frame_reported_by_number(self):
        e = errors.make_status_error(99, "newer")
        self.assertIs(type(e), gpuframe.UnknownStatusError)
        self.assertEqual((e.status, e.name, e.fatal, e.text), (99, "unknown", False, "newer"))
        self.assertEqual(str(e), "unknown (status 99): newer")

    def test_bad_length_fatality_is_per_instance(self):
        self.assertFalse(errors.make_status_error(7).fatal)
        self.assertTrue(errors.make_status_error(7, fatal=True).fatal)

    def test_python_exception_families(self):
        self.assertTrue(issubclass(gpuframe.ConnectionClosedError, ConnectionError))
        self.assertTrue(issubclass(gpuframe.ClientTimeoutError, TimeoutError))
        self.assertTrue(issubclass(gpuframe.NoSuchPipelineError, LookupError))
        e = gpuframe.ConnectionClosedError("closed", cause=KeyError("x"))
        self.assertEqual((str(e), e.errno), ("closed", None))
        self.assertIsInstance(e.cause, KeyError)


class DecodeHeaderTest(unittest.TestCase):
    """decode_header refuses every reply PROTOCOL.md says a client cannot parse."""

    def reply(self, msg_type=MsgType.RESULT, status=0, payload_bytes=0, **kw):
        return protocol.encode_header(msg_type, 1, 2, payload_bytes, status=status, **kw)

    def refused(self, buf, why):
        with self.assertRaisesRegex(gpuframe.ProtocolError, why):
            protocol.decode_header(buf)

    def test_accepts_every_reply_type(self):
        for t in (MsgType.RESULT, MsgType.LIST, MsgType.STATS, MsgType.TRACE):
            self.assertEqual(protocol.decode_header(self.reply(t, payload_bytes=5)),
                             protocol.Header(1, t, 0, 1, 2, 0, 5))
        self.assertEqual(protocol.decode_header(self.reply(MsgType.ERROR, 10, 256)).status, 10)

    def test_unknown_status_in_an_error_is_accepted(self):
        self.assertEqual(protocol.decode_header(self.reply(MsgType.ERROR, 4000, 3)).status, 4000)

    def test_refusals(self):
        bad_magic = bytearray(self.reply())
        bad_magic[0:4] = b"GFRX"
        self.refused(bytes(bad_magic), "bad magic")
        self.refused(self.reply(version=5), "version 5")
        self.refused(self.reply(version=0), "version 0")
        self.refused(self.reply(MsgType.FRAME), "type 1")
        self.refused(self.reply(10, version=4), "type 10")
        self.refused(self.reply(flags=1), "flags 0x0001 \\(must be 0\\)")
        self.refused(self.reply(MsgType.RESULT, status=6), "RESULT reply with status 6")
        self.refused(self.reply(MsgType.ERROR, status=0), "ERROR reply with status 0")
        self.refused(self.reply(MsgType.ERROR, 6, 257), "257 bytes")

    def test_version_2_adds_regions_and_the_shm_flag(self):
        v2 = dict(version=2)
        self.assertEqual(protocol.decode_header(self.reply(payload_bytes=5, **v2)),
                         protocol.Header(2, MsgType.RESULT, 0, 1, 2, 0, 5))
        self.assertEqual(protocol.decode_header(self.reply(flags=1, payload_bytes=24, **v2)),
                         protocol.Header(2, MsgType.RESULT, 1, 1, 2, 0, 24))
        self.assertEqual(protocol.decode_header(self.reply(7, payload_bytes=16, **v2)).type,
                         MsgType.REGION_ADD)
        self.assertEqual(protocol.decode_header(self.reply(8, **v2)).type,
                         MsgType.REGION_REMOVE)
        # REGION_* exist only in version 2, SHM only on a version-2 RESULT.
        self.refused(self.reply(7, payload_bytes=16), "type 7 in version 1")
        self.refused(self.reply(8), "type 8 in version 1")
        self.refused(self.reply(MsgType.LIST, flags=1, **v2), "flags 0x0001 \\(must be 0\\)")
        self.refused(self.reply(flags=2, payload_bytes=24, **v2), "flags 0x0002")
        # Their payloads have fixed lengths.
        self.refused(self.reply(flags=1, payload_bytes=16, **v2), "RESULT \\(SHM\\) reply of 16")
        self.refused(self.reply(7, payload_bytes=15, **v2), "REGION_ADD reply of 15 bytes")
        self.refused(self.reply(8, payload_bytes=1, **v2), "REGION_REMOVE reply of 1 bytes")
        # An ERROR answers a REGION_ADD with text, as any request.
        self.assertEqual(protocol.decode_header(self.reply(MsgType.ERROR, 16, 40, **v2)).status,
                         16)

    def test_the_versions_read_are_an_argument(self):
        with self.assertRaisesRegex(gpuframe.ProtocolError, "version 2 \\(this client reads 1\\)"):
            protocol.decode_header(self.reply(version=2), versions=(1,))
        self.assertEqual(protocol.SUPPORTED_VERSIONS, (1, 2, 3, 4))

    def test_version_3_frames_carry_their_deadline_in_status(self):
        """A version-3 FRAME header as PROTOCOL.md's example has it, and its
        replies read like version 2's."""
        deadline_ns = 5000000000123456 + 33000000
        self.assertEqual(protocol.deadline_wire(deadline_ns),
                         (deadline_ns // 1000) & 0xFFFFFFFF)
        self.assertEqual(protocol.deadline_wire(3 * (1 << 32) * 1000 + 500000), 500)
        h = protocol.encode_header(MsgType.FRAME, 10, 0, 4096, version=3,
                                   flags=protocol.FLAG_DEADLINE | protocol.FLAG_LATEST,
                                   status=0x12345678)
        self.assertEqual(h.hex(" "), "47 46 52 4d 03 01 00 03 0a 00 00 00 00 00 00 00 "
                                     "00 00 00 00 78 56 34 12 00 10 00 00 00 00 00 00")
        self.assertEqual(protocol.decode_header(self.reply(payload_bytes=5, version=3)),
                         protocol.Header(3, MsgType.RESULT, 0, 1, 2, 0, 5))
        err = protocol.decode_header(self.reply(MsgType.ERROR, protocol.Status.SUPERSEDED,
                                                version=3))
        self.assertEqual(err.status, 21)
        self.refused(self.reply(flags=protocol.FLAG_LATEST, version=3), "flags 0x0200")

    def test_version_4_adds_device_regions_and_the_device_flag(self):
        v4 = dict(version=4)
        self.assertEqual(protocol.decode_header(self.reply(flags=2, payload_bytes=24, **v4)),
                         protocol.Header(4, MsgType.RESULT, 2, 1, 2, 0, 24))
        self.assertEqual(protocol.decode_header(self.reply(flags=1, payload_bytes=24, **v4)),
                         protocol.Header(4, MsgType.RESULT, 1, 1, 2, 0, 24))
        self.assertEqual(protocol.decode_header(self.reply(9, payload_bytes=16, **v4)).type,
                         MsgType.DEVICE_REGION_ADD)
        self.refused(self.reply(9, payload_bytes=16, version=2), "type 9 in version 2")
        self.refused(self.reply(9, payload_bytes=16, version=3), "type 9 in version 3")
        self.refused(self.reply(flags=3, payload_bytes=24, **v4), "flags 0x0003")
        self.refused(self.reply(flags=2, payload_bytes=16, **v4), "RESULT \\(DEVICE\\) reply of 16")
        self.refused(self.reply(9, payload_bytes=15, **v4), "DEVICE_REGION_ADD reply of 15 bytes")
        self.refused(self.reply(version=5), "version 5")
        self.assertEqual(protocol.encode_device_region(2 << 20),
                         bytes.fromhex("0000200000000000" "01000000" "00000000"))


class PipelinesTest(unittest.TestCase):
    """LIST documents and each kind's length rule."""

    @classmethod
    def setUpClass(cls):
        doc = read_doc()
        example = re.search(r"```json\n(.*?)```", doc, re.S).group(1)
        cls.pipelines = Pipelines.from_json(json.loads(example))

    def test_the_documented_list(self):
        p = self.pipelines
        self.assertEqual(len(p), 4)
        self.assertEqual(p.ids, {"echo": 0, "scale2": 1, "wobble": 2, "rgb224": 3})
        self.assertEqual(p.names, ["echo", "scale2", "wobble", "rgb224"])
        self.assertEqual([x.kind for x in p], ["echo", "affine", "sincos", "normalize_u8"])
        self.assertEqual(p["scale2"].params, {"a": 2, "b": 1})
        self.assertIs(p.by_id(3), p["rgb224"])
        self.assertIs(p[2], p["wobble"])
        self.assertIsNone(p.by_id(4))
        self.assertIn("echo", p)
        self.assertNotIn("nope", p)
        self.assertIsNone(p.get("nope"))
        with self.assertRaisesRegex(gpuframe.NoSuchPipelineError, "no pipeline named 'nope'"):
            p["nope"]
        self.assertEqual(p[0].as_dict()["doc"], "Returns the input unchanged.")

    def test_length_rules(self):
        p = self.pipelines
        self.assertEqual(p["echo"].output_bytes(0), 0)
        self.assertEqual(p["echo"].output_bytes(7), 7)
        self.assertEqual(p["scale2"].output_bytes(16), 16)
        self.assertEqual(p["wobble"].output_bytes(0), 0)
        with self.assertRaisesRegex(ValueError, "multiple of 4"):
            p["wobble"].output_bytes(6)
        self.assertEqual(p["rgb224"].input_bytes, 224 * 224 * 3)
        self.assertEqual(p["rgb224"].output_bytes(224 * 224 * 3), 4 * 224 * 224 * 3)
        with self.assertRaisesRegex(ValueError, "exactly width\\*height\\*3 = 150528"):
            p["rgb224"].output_bytes(150527)
        self.assertIsNone(Pipeline(5, "new", "blur").output_bytes(12))

    def test_plugins_and_chains_show_their_parameters(self):
        p = Pipelines.from_json({"pipelines": [
            {"id": 0, "name": "clamp01", "kind": "plugin", "plugin": "clamp",
             "path": "/p/gf_example.so", "params": {"lo": 0, "hi": 1}},
            {"id": 1, "name": "chain", "stages": [
                {"kind": "affine", "params": {"a": 2, "b": -0.5}},
                {"kind": "plugin", "plugin": "clamp", "path": "/p/gf_example.so",
                 "params": {"lo": -1, "hi": 1}},
                {"kind": "affine", "params": {"a": 1, "b": 0}}]}]})
        self.assertEqual(p["clamp01"].params, {"lo": 0, "hi": 1})
        self.assertEqual(p["clamp01"].stages, ({"kind": "plugin", "plugin": "clamp",
                                                 "path": "/p/gf_example.so",
                                                 "params": {"lo": 0, "hi": 1}},))
        self.assertEqual(p["chain"].kind, "affine+clamp+affine")
        self.assertEqual(p["chain"].params, {"affine": {"a": 2, "b": -0.5},
                                             "clamp": {"lo": -1, "hi": 1},
                                             "affine#2": {"a": 1, "b": 0}})
        self.assertEqual([s.get("plugin", s["kind"]) for s in p["chain"].stages],
                         ["affine", "clamp", "affine"])
        self.assertEqual(repr(p["chain"]),
                         "Pipeline(id=1, name='chain', kind='affine+clamp+affine', params="
                         "{'affine': {'a': 2, 'b': -0.5}, 'clamp': {'lo': -1, 'hi': 1}, "
                         "'affine#2': {'a': 1, 'b': 0}})")
        with self.assertRaisesRegex(gpuframe.ProtocolError, "stages\\[0\\].params is not an object"):
            Pipelines.from_json({"pipelines": [{"id": 0, "name": "c", "stages": [
                {"kind": "affine", "params": [1]}, {"kind": "echo"}]}]})

    def test_unknown_keys_are_kept_and_ignored(self):
        p = Pipelines.from_json({"pipelines": [
            {"id": 0, "name": "x", "kind": "echo", "params": {}, "doc": "", "gpu": 1}],
            "generation": 4})
        self.assertEqual(p[0].info["gpu"], 1)

    def test_malformed_lists(self):
        for doc in ({}, {"pipelines": {}}, {"pipelines": [1]},
                    {"pipelines": [{"id": -1, "name": "x", "kind": "echo"}]},
                    {"pipelines": [{"id": True, "name": "x", "kind": "echo"}]},
                    {"pipelines": [{"id": 0, "name": 3, "kind": "echo"}]},
                    {"pipelines": [{"id": 0, "name": "x", "kind": "echo", "params": []}]},
                    {"pipelines": [{"id": 0, "name": "x", "kind": "normalize_u8",
                                    "params": {"width": 2}}]}):
            with self.assertRaises(gpuframe.ProtocolError, msg=repr(doc)):
                Pipelines.from_json(doc)


class FramesAsTensorsTest(unittest.TestCase):
    """LIST's "inputs" and "outputs" (PROTOCOL.md, "Frames as tensors") make
    the arrays a pipeline takes and gives, whatever its kind."""

    def entry(self, inputs, outputs, kind="plugin"):
        return Pipelines.from_json({"pipelines": [
            {"id": 0, "name": "m", "kind": kind, "params": {}, "inputs": inputs,
             "outputs": outputs}]})[0]

    def test_one_tensor_each_way(self):
        p = self.entry([{"dtype": "uint8", "shape": [224, 224, 3]}],
                       [{"dtype": "float32", "shape": [1000]}])
        T = gpuframe.TensorSpec
        self.assertEqual((p.inputs, p.outputs),
                         ((T("uint8", (224, 224, 3)),), (T("float32", (1000,)),)))
        self.assertEqual((p.input_bytes, p.output_bytes(224 * 224 * 3)), (150528, 4000))
        with self.assertRaisesRegex(ValueError, "exactly 150528 bytes, not 7"):
            p.output_bytes(7)
        enc = encode_frame(p, np.zeros((224, 224, 3), np.uint8))
        self.assertEqual(enc.expect_bytes, 4000)
        out, view = enc.make_output(4000)
        self.assertEqual((out.dtype, out.shape, view.nbytes), (np.dtype("<f4"), (1000,), 4000))
        with self.assertRaisesRegex(TypeError, "plugin pipeline 'm' takes uint8 arrays, not "
                                               "float32 \\(convert with .astype\\(numpy.uint8\\)\\)"):
            encode_frame(p, np.zeros(3, np.float32))
        self.assertEqual(p.input_array().shape, (224, 224, 3))

    def test_a_variable_dimension_comes_from_the_length(self):
        p = self.entry([{"dtype": "float16", "shape": [-1, 8]}],
                       [{"dtype": "int64", "shape": [-1, 2]}])
        self.assertIsNone(p.output_bytes(32))  # only the daemon knows the rule
        enc = encode_frame(p, np.zeros((3, 8), ">f2"))  # converted to little-endian
        self.assertEqual(bytes(enc.payload), np.zeros((3, 8), "<f2").tobytes())
        out, _ = enc.make_output(48)
        self.assertEqual((out.dtype, out.shape), (np.dtype("<i8"), (3, 2)))
        out, _ = enc.make_output(20)  # not whole rows: flat bytes, never a wrong shape
        self.assertEqual((out.dtype, out.shape), (np.dtype(np.uint8), (20,)))

    def test_several_tensors_are_one_record(self):
        p = self.entry([{"dtype": "float16", "shape": [2, 3]}, {"dtype": "int64", "shape": []}],
                       [{"dtype": "float32", "shape": [2]}, {"dtype": "uint8", "shape": [3]}])
        frame = p.input_array()
        self.assertEqual((frame.shape, frame.dtype.itemsize), ((), 20))
        frame["t0"] = np.arange(6).reshape(2, 3)
        frame["t1"] = -5
        enc = encode_frame(p, frame)
        self.assertEqual(bytes(enc.payload), np.arange(6, dtype="<f2").tobytes()
                         + struct.pack("<q", -5))
        self.assertEqual(enc.expect_bytes, 11)
        out, view = enc.make_output(11)
        view[:] = struct.pack("<ff", 1.5, -2.0) + b"abc"
        self.assertEqual(out["t0"].tolist(), [1.5, -2.0])
        self.assertEqual(bytes(out["t1"]), b"abc")
        # Raw bytes go as they are; another dtype does not.
        self.assertEqual(bytes(encode_frame(p, np.arange(20, dtype=np.uint8)).payload),
                         bytes(range(20)))
        with self.assertRaisesRegex(TypeError, "takes records of its 2 tensors"):
            encode_frame(p, np.zeros(5, np.float32))

    def test_elementwise_keeps_the_frames_shape(self):
        p = self.entry([{"dtype": "float32", "shape": [-1]}], [{"dtype": "float32", "shape": [-1]}])
        out, _ = encode_frame(p, np.zeros((4, 5), np.float32)).make_output(80)
        self.assertEqual(out.shape, (4, 5))

    def test_bfloat16_and_unknown_dtypes(self):
        p = self.entry([{"dtype": "bfloat16", "shape": [4]}], [{"dtype": "float8", "shape": [4]}])
        bf16 = gpuframe.pipelines.DTYPES["bfloat16"]
        self.assertEqual(bf16.itemsize, 2)
        self.assertEqual(bytes(encode_frame(p, np.zeros(4, bf16)).payload), bytes(8))
        # An output dtype of a newer daemon: its bytes, flat.
        self.assertIsNone(p.outputs[0].dtype)
        out, _ = encode_frame(p, np.zeros(4, bf16)).make_output(4)
        self.assertEqual((out.dtype, out.shape), (np.dtype(np.uint8), (4,)))

    def test_malformed_descriptions(self):
        good = [{"dtype": "uint8", "shape": [1]}]
        for bad in ([], [1], [{"dtype": "uint8"}], [{"dtype": 3, "shape": [1]}],
                    [{"dtype": "uint8", "shape": [-2]}], [{"dtype": "uint8", "shape": [1.5]}],
                    [{"dtype": "uint8", "shape": [-1, -1]}],
                    [{"dtype": "uint8", "shape": [-1]}, {"dtype": "uint8", "shape": [2]}],
                    [{"dtype": "uint8", "shape": [1] * 9}], good * 9):
            with self.assertRaises(gpuframe.ProtocolError, msg=repr(bad)):
                self.entry(bad, good)
            with self.assertRaises(gpuframe.ProtocolError, msg=repr(bad)):
                self.entry(good, bad)

    def test_a_list_without_them_describes_the_built_in_kinds(self):
        p = Pipelines.from_json({"pipelines": [
            {"id": 0, "name": "r", "kind": "normalize_u8",
             "params": {"width": 4, "height": 2, "mean": [0, 0, 0], "std": [1, 1, 1]}},
            {"id": 1, "name": "x", "kind": "plugin", "params": {}}]})
        T = gpuframe.TensorSpec
        self.assertEqual((p[0].inputs, p[0].outputs),
                         ((T("uint8", (2, 4, 3)),), (T("float32", (3, 2, 4)),)))
        self.assertEqual((p[1].inputs, p[1].outputs), (None, None))
        out, _ = encode_frame(p[1], np.zeros(3, np.float32)).make_output(12)
        self.assertEqual((out.dtype, out.shape), (np.dtype(np.uint8), (12,)))


class EncodeFrameTest(unittest.TestCase):
    """Frames go out from the caller's memory when it has the wire's layout."""

    echo = Pipeline(0, "echo", "echo")
    affine = Pipeline(1, "aff", "affine", {"a": 2, "b": 1})
    rgb = Pipeline(3, "rgb", "normalize_u8", {"width": 4, "height": 2,
                                              "mean": [0, 0, 0], "std": [1, 1, 1]})

    def shares(self, payload, arr):
        return np.shares_memory(np.frombuffer(payload, np.uint8), arr)

    def test_float32_array_is_sent_from_its_own_memory(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        enc = encode_frame(self.affine, x)
        self.assertTrue(self.shares(enc.payload, x))
        self.assertEqual(bytes(enc.payload), x.astype("<f4").tobytes())
        self.assertEqual(enc.expect_bytes, 48)
        out, view = enc.make_output(48)
        self.assertEqual((out.shape, out.dtype), ((3, 4), np.dtype("<f4")))
        self.assertTrue(np.shares_memory(np.frombuffer(view, np.uint8), out))

    def test_other_layouts_are_copied_once_into_the_wire_layout(self):
        x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
        enc = encode_frame(self.affine, x)
        self.assertFalse(self.shares(enc.payload, x))
        self.assertEqual(bytes(enc.payload), np.ascontiguousarray(x).tobytes())
        big_endian = np.arange(3, dtype=">f4")
        self.assertEqual(bytes(encode_frame(self.affine, big_endian).payload),
                         np.arange(3, dtype="<f4").tobytes())

    def test_wrong_dtypes_are_refused(self):
        with self.assertRaisesRegex(TypeError, "takes float32 arrays, not float64"):
            encode_frame(self.affine, np.zeros(3))
        with self.assertRaisesRegex(TypeError, "takes uint8 arrays, not int16"):
            encode_frame(self.rgb, np.zeros((2, 4, 3), np.int16))
        with self.assertRaisesRegex(TypeError, "Python objects"):
            encode_frame(self.echo, np.array([object()]))
        with self.assertRaisesRegex(TypeError, "not int"):
            encode_frame(self.echo, 5)

    def test_echo_keeps_dtype_and_shape(self):
        x = np.arange(30, dtype=np.uint16).reshape(2, 3, 5)
        enc = encode_frame(self.echo, x)
        self.assertTrue(self.shares(enc.payload, x))
        out, _ = enc.make_output(60)
        self.assertEqual((out.shape, out.dtype), ((2, 3, 5), np.uint16))

    def test_normalize_u8_gives_planes(self):
        enc = encode_frame(self.rgb, np.zeros((2, 4, 3), np.uint8))
        self.assertEqual(enc.expect_bytes, 96)
        out, _ = enc.make_output(96)
        self.assertEqual((out.shape, out.dtype), ((3, 2, 4), np.dtype("<f4")))
        self.assertEqual(encode_frame(self.rgb, np.zeros((2, 3, 3), np.uint8)).expect_bytes,
                         REFUSED)

    def test_bytes_like_frames_give_bytearrays(self):
        for frame in (b"abcd", bytearray(b"abcd"), memoryview(b"xxabcdxx")[2:6]):
            enc = encode_frame(self.echo, frame)
            self.assertEqual(bytes(enc.payload), b"abcd")
            out, view = enc.make_output(4)
            self.assertIsInstance(out, bytearray)
        ints = memoryview(np.arange(4, dtype=np.int32).tobytes()).cast("i")
        self.assertEqual(encode_frame(self.affine, ints).payload.nbytes, 16)
        self.assertEqual(encode_frame(self.affine, b"12345").expect_bytes, REFUSED)
        unknown = Pipeline(9, None, None)
        self.assertIsNone(encode_frame(unknown, b"12345").expect_bytes)


if __name__ == "__main__":
    unittest.main(verbosity=2)
