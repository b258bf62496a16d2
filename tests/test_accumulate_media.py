"""The media of a Result: ``audio`` (the audio blocks joined as bytes), ``images`` and
``transcript``; their ``to_dict`` form; and their agreement with the media dialects'
own final objects (``rebuild``)."""

from __future__ import annotations

import base64
import io
import struct
import wave
from pathlib import Path

import pytest

from polystream import decode
from polystream.accumulate import Accumulator, Audio, Image, Segment, Transcript, accumulate
from polystream.decoding import decode_events
from polystream.dialects import get_dialect
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    Event,
    Finish,
    FinishReason,
    MediaInfo,
    StreamStart,
    TextDelta,
    TranscriptSegment,
)
from polystream.media import join_base64

FIXTURES = Path(__file__).parent / "fixtures"
STOP = FinishReason(unified="stop")
L16 = "audio/L16;codec=pcm;rate=24000"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sawtooth(samples: int) -> bytes:
    """The samples of tests/fixtures/gemini_generate/tts.* (see make_fixtures.py)."""
    return struct.pack(f"<{samples}h", *[(k * 1100) % 16000 - 8000 for k in range(samples)])


def audio_stream(*deltas: str, media: MediaInfo | None = None, end: bool = True) -> list[Event]:
    events: list[Event] = [
        StreamStart(dialect="test"),
        BlockStart(index=0, kind="audio", media=media),
    ]
    events += [DataDelta(index=0, delta=d) for d in deltas]
    if end:
        events += [BlockEnd(index=0), Finish(status="completed", reason=STOP)]
    return events


# -- joining base64 ---------------------------------------------------------------------------


def test_join_base64_of_padded_pieces_and_of_cut_text() -> None:
    # Each piece its own padded base64 text (OpenAI speech deltas, Gemini parts).
    assert join_base64(["AAE=", "AgME", "BQ=="]) == b"\x00\x01\x02\x03\x04\x05"
    # One base64 text cut anywhere.
    assert join_base64(["aGV", "sbG8gd2", "9ybGQh"]) == b"hello world!"
    assert join_base64([]) == b""
    with pytest.raises(ValueError, match=r"^Incorrect padding$"):
        join_base64(["AAE=", "AgM"])
    with pytest.raises(ValueError, match=r"^Discontinuous padding not allowed$"):
        join_base64(["AA=A"])


def test_audio_of_padded_deltas_is_their_bytes_and_the_block_data_valid_base64() -> None:
    result = accumulate(audio_stream("AAE=", "AgME", "BQ=="))
    assert result.audio == Audio(data=b"\x00\x01\x02\x03\x04\x05", blocks=[0], complete=True)
    # The block's data is one valid base64 text (not "AAE=AgMEBQ==").
    assert result.blocks[0].data == "AAECAwQF"


def test_audio_of_a_cut_base64_text_keeps_the_text_as_it_came() -> None:
    deltas = ("aGV", "sbG8gd2", "9ybGQh")
    result = accumulate(audio_stream(*deltas))
    assert result.audio is not None and result.audio.data == b"hello world!"
    assert result.blocks[0].data == "aGVsbG8gd29ybGQh"


def test_audio_that_is_not_base64_is_named_and_left_out() -> None:
    result = accumulate(audio_stream("AAE=", "%%%%"))
    assert result.audio == Audio(
        data=b"",
        blocks=[],
        complete=True,
        error=("block 0: its data is not base64 (Only base64 data is allowed)"),
    )
    assert result.blocks[0].data == "AAE=%%%%"  # as it came


def test_audio_joins_the_blocks_of_one_format_and_names_the_others() -> None:
    pcm = MediaInfo(mime_type="audio/pcm", format="pcm", sample_rate=24000, channels=1)
    events: list[Event] = [StreamStart(dialect="test")]
    for index, (media, data, candidate) in enumerate(
        [
            (pcm, b"\x01\x00", 0),
            (MediaInfo(mime_type="audio/mpeg", format="mp3"), b"ID3", 0),
            (pcm, b"\x02\x00", 1),  # another candidate: not its audio
            (pcm, b"\x03\x00", 0),
        ]
    ):
        events += [
            BlockStart(index=index, kind="audio", media=media, candidate=candidate),
            DataDelta(index=index, delta=b64(data)),
            BlockEnd(index=index),
        ]
    events.append(Finish(status="completed", reason=STOP))
    assert accumulate(events).audio == Audio(
        data=b"\x01\x00\x03\x00",
        mime_type="audio/pcm",
        format="pcm",
        sample_rate=24000,
        channels=1,
        blocks=[0, 3],
        complete=True,
        error="block 1 is in another format (audio/mpeg)",
    )


def test_audio_of_an_unstated_format_is_the_one_its_bytes_show() -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt "
    result = accumulate(audio_stream(b64(wav), media=MediaInfo(channels=1)))
    assert result.audio is not None
    assert (result.audio.mime_type, result.audio.format) == ("audio/wav", "wav")
    assert result.audio.wav() == wav  # WAV is already a WAV file
    # PCM shows nothing: the format stays unknown.
    result = accumulate(audio_stream(b64(b"\x00\x01\x02\x03")))
    assert result.audio is not None and result.audio.format is None


def test_a_snapshot_has_the_audio_so_far() -> None:
    acc = Accumulator()
    for event in audio_stream("AAE=", "AgME", media=MediaInfo(format="pcm"), end=False):
        acc.feed(event)
    snap = acc.snapshot
    assert snap.audio is not None
    assert (snap.audio.data, snap.audio.complete) == (b"\x00\x01\x02\x03\x04", False)
    acc.feed(DataDelta(index=0, delta="BQ=="))
    acc.feed(BlockEnd(index=0))
    acc.feed(Finish(status="completed", reason=STOP))
    final = acc.result()
    assert final.audio is not None
    assert (final.audio.data, final.audio.complete) == (b"\x00\x01\x02\x03\x04\x05", True)
    assert acc.result() is final


def test_wav_of_audio_that_is_not_pcm_nor_wav() -> None:
    with pytest.raises(LocalProtocolError, match="mp3 audio cannot be written as WAV"):
        Audio(data=b"ID3", format="mp3").wav()
    with pytest.raises(LocalProtocolError, match="PCM audio without a sample rate"):
        Audio(data=b"\x00\x00", format="pcm").wav()
    with pytest.raises(LocalProtocolError, match="audio of an unknown format"):
        Audio(data=b"\x00\x00").wav()
    assert Audio(data=b"\x00\x00", format="mp3").duration is None


# -- Gemini streaming TTS -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".sse", ".jsonarray"])
def test_gemini_tts_is_one_pcm_audio(suffix: str) -> None:
    result = decode((FIXTURES / "gemini_generate" / "tts").with_suffix(suffix).read_bytes())
    pcm = sawtooth(158)
    assert result.audio == Audio(
        data=pcm,
        mime_type=L16,
        format="pcm",
        sample_rate=24000,
        channels=1,
        blocks=[0, 1, 2],
        complete=True,
    )
    assert result.audio.duration == 0.006583  # 316 bytes / (24000 Hz x 2 bytes)
    assert result.usage.audio_output_tokens == 48
    with wave.open(io.BytesIO(result.audio.wav())) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (
            1,
            2,
            24000,
        )
        assert reader.getnframes() == 158
        assert reader.readframes(158) == pcm


def test_gemini_tts_agrees_with_the_rebuilt_response() -> None:
    events = decode_events((FIXTURES / "gemini_generate" / "tts.sse").read_bytes())
    native = get_dialect("gemini_generate").rebuild(events)
    [part] = native["candidates"][0]["content"]["parts"]
    assert part["inlineData"]["mimeType"] == L16
    audio = accumulate(events).audio
    assert audio is not None and base64.b64decode(part["inlineData"]["data"]) == audio.data


def test_gemini_audio_blocks_state_their_pcm_format() -> None:
    events = decode_events((FIXTURES / "gemini_generate" / "tts.sse").read_bytes())
    starts = [e for e in events if isinstance(e, BlockStart)]
    media = MediaInfo(mime_type=L16, format="pcm", sample_rate=24000, channels=1)
    assert starts == [BlockStart(index=i, kind="audio", media=media) for i in range(3)]


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("openai_chat", "Chat Completions has no audio output"),
        ("anthropic_messages", "the Messages API cannot carry a audio block from gemini_generate"),
        ("openai_responses", "no Responses output item for a foreign audio block"),
    ],
)
def test_a_text_only_target_reports_each_audio_block_lost(target: str, reason: str) -> None:
    events = decode_events((FIXTURES / "gemini_generate" / "tts.sse").read_bytes())
    encoder = get_dialect(target).encoder()
    wire = b"".join(encoder.encode(event) for event in events) + encoder.close()
    lost = [(loss.what, loss.event_index, loss.reason, loss.carried) for loss in encoder.losses]
    audio = [entry for entry in lost if entry[0] == "block:audio"]
    assert audio == [("block:audio", index, reason, False) for index in (1, 5, 9)]
    # (and none of the audio is in what was written)
    assert b"wOAM5Vjp" not in wire


def test_the_speech_audio_agrees_with_its_rebuilt_object() -> None:
    events = decode_events((FIXTURES / "openai_speech" / "audio.sse").read_bytes())
    native = get_dialect("openai_speech").rebuild(events)
    audio = accumulate(events).audio
    assert audio is not None and audio.data == base64.b64decode(native["audio"])
    assert len(audio.data) == 320


def test_raw_speech_audio_has_its_content_types_format() -> None:
    mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(200))
    result = decode(mp3, content_type="audio/mpeg")
    assert result.audio == Audio(
        data=mp3, mime_type="audio/mpeg", format="mp3", channels=1, blocks=[0], complete=True
    )
    pcm = bytes(range(100))
    result = decode(pcm, "openai_speech", content_type="audio/pcm")
    assert result.audio is not None
    assert (result.audio.format, result.audio.sample_rate, result.audio.data) == ("pcm", 24000, pcm)


# -- images -----------------------------------------------------------------------------------


def test_images_of_a_generation_stream() -> None:
    events = decode_events((FIXTURES / "openai_images" / "generation.sse").read_bytes())
    native = get_dialect("openai_images").rebuild(events)
    [image] = accumulate(events).images
    assert image == Image(
        index=0,
        data=base64.b64decode(native["data"][0]["b64_json"]),
        mime_type="image/png",
        format="png",
        size="1024x1024",
        quality="low",
        background="opaque",
        partial_images=2,
        final=True,
    )


def test_an_image_cut_after_its_partial_image_is_that_partial_image() -> None:
    first = b"\x89PNG first"
    second = b"\x89PNG second"
    events: list[Event] = [
        StreamStart(dialect="test"),
        BlockStart(index=0, kind="image", media=MediaInfo(mime_type="image/webp", size="1x1")),
        DataDelta(index=0, delta=b64(first), replace=True, partial=0),
        DataDelta(index=0, delta=b64(second), replace=True, partial=1),
        Finish(status="truncated", reason=FinishReason(unified="error")),
    ]
    assert accumulate(events).images == [
        Image(
            index=0,
            data=second,
            mime_type="image/webp",
            format="webp",
            size="1x1",
            partial_images=2,
            final=False,
        )
    ]


def test_a_gemini_image_takes_its_media_type_from_its_data() -> None:
    result = decode((FIXTURES / "gemini_generate" / "image.sse").read_bytes())
    [image] = result.images
    assert (image.index, image.mime_type, image.format, image.final) == (
        1,
        "image/png",
        "png",
        True,
    )
    assert image.data.startswith(b"\x89PNG\r\n\x1a\n") and len(image.data) == 70


def test_an_image_that_is_not_base64() -> None:
    events: list[Event] = [
        StreamStart(dialect="test"),
        BlockStart(index=0, kind="image"),
        DataDelta(index=0, delta="not base64!", mime_type="image/png", replace=True),
        BlockEnd(index=0),
    ]
    [image] = accumulate(events).images
    assert (image.data, image.final) == (b"", True)
    assert image.error == "its data is not base64 (Only base64 data is allowed)"


# -- transcripts ------------------------------------------------------------------------------


def test_the_transcript_of_a_diarized_stream() -> None:
    result = decode((FIXTURES / "openai_transcription" / "diarized.sse").read_bytes())
    assert result.transcript == Transcript(
        text="Hello, thanks for calling. Hi, I have a question.",
        segments=[
            Segment(text="Hello, thanks for calling.", start=0.0, end=2.4, speaker="A", id="seg_0"),
            Segment(text=" Hi, I have a question.", start=2.6, end=4.9, speaker="B", id="seg_1"),
        ],
        languages=[],
        complete=True,
    )
    assert result.transcript.language is None
    assert result.text == ""  # a transcript is not output text


def test_the_languages_a_transcription_detected() -> None:
    stream = (
        b'data: {"type":"transcript.text.delta","delta":"Bonjour"}\n\n'
        b'data: {"type":"transcript.text.done","text":"Bonjour","languages":'
        b'[{"code":"fr"},{"code":"en"}]}\n\n'
    )
    result = decode(stream)
    assert result.transcript == Transcript(text="Bonjour", languages=["fr", "en"], complete=True)
    assert result.transcript.language == "fr"
    assert result.to_dict()["transcript"] == {
        "text": "Bonjour",
        "language": "fr",
        "languages": ["fr", "en"],
        "segments": [],
        "complete": True,
    }


def test_a_transcript_restated_whole_at_its_end_and_one_language() -> None:
    events: list[Event] = [
        StreamStart(dialect="test"),
        BlockStart(index=0, kind="transcript", extra={"language": "de"}),
        TranscriptSegment(index=0, text="Hallo", start=0.5, end=1.25),
        BlockEnd(index=0, value="Hallo"),
        BlockStart(index=1, kind="transcript"),
        TextDelta(index=1, delta=" Welt"),
    ]
    assert accumulate(events).transcript == Transcript(
        text="Hallo Welt",
        segments=[Segment(text="Hallo", start=0.5, end=1.25)],
        languages=["de"],
        complete=False,
    )


# -- to_dict ----------------------------------------------------------------------------------


def test_to_dict_has_the_media_only_when_the_stream_had_some() -> None:
    assert {"audio", "images", "transcript"}.isdisjoint(
        accumulate([StreamStart(dialect="test")]).to_dict()
    )
    pcm = MediaInfo(mime_type=L16, format="pcm", sample_rate=24000, channels=1)
    events = [
        *audio_stream("AAE=", "AgM=", media=pcm)[:-1],
        BlockStart(index=1, kind="image", media=MediaInfo(format="png", quality="high")),
        DataDelta(index=1, delta="iVBO", replace=True, partial=0),
        DataDelta(index=1, delta="iVBORw==", replace=True),
        BlockEnd(index=1),
        Finish(status="completed", reason=STOP),
    ]
    out = accumulate(events).to_dict()
    assert out["audio"] == {
        "mime_type": L16,
        "format": "pcm",
        "sample_rate": 24000,
        "channels": 1,
        "bytes": 4,
        "duration": 0.000083,
        "blocks": [0],
        "complete": True,
        "data": "AAECAw==",
    }
    assert out["images"] == [
        {
            "index": 1,
            "mime_type": None,
            "format": "png",
            "size": None,
            "quality": "high",
            "background": None,
            "partial_images": 1,
            "final": True,
            "bytes": 4,
            "data": "iVBORw==",
        }
    ]
    assert "transcript" not in out
    assert out["blocks"][0]["data"] == "AAECAw=="
