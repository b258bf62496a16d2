// One capture: its summary, timeline, native and unified events, result, problems,
// native final object and transcoding preview.

import { bytes, details, el, json, section, seconds, show, table } from "ps/view.js";

const USAGE = [
  "input_tokens",
  "output_tokens",
  "reasoning_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "tool_prompt_tokens",
  "audio_input_tokens",
  "audio_output_tokens",
  "total_tokens",
];

export { USAGE };

export function renderCapture(capture, key) {
  const id = (what, n) => `${what}-${key}-${n}`;
  const root = el("article", { class: "capture", dataset: { capture: key } });
  root.append(
    overview(capture),
    timeline(capture, id),
    events(capture, id),
    result(capture),
    problems(capture, id),
    nativeFinal(capture),
    transcodes(capture, id),
  );
  return root;
}

// Scroll to a unified event in the events section and open it.
function reveal(id, n) {
  const node = document.getElementById(id("ev", n));
  if (!node) return;
  node.open = true;
  node.dispatchEvent(new Event("toggle"));
  node.scrollIntoView({ block: "center" });
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 1200);
}

function eventLink(id, n) {
  if (n === null || n === undefined) return "–";
  return el("a", { href: `#${id("ev", n)}`, onclick: (e) => (e.preventDefault(), reveal(id, n)) }, `#${n}`);
}

function overview(capture) {
  const r = capture.result;
  const s = capture.stats;
  const finish = r.finish_reason;
  const facts = [
    ["capture", capture.name],
    ["dialect", show(capture.dialect)],
    ["framing", show(capture.framing)],
    ["size", bytes(capture.bytes)],
    ["status", r.status],
    ["finish", finish ? `${finish.unified} (raw: ${show(finish.raw)})` : "–"],
    ["native events", s.native_events],
    ["unified events", s.events],
    ["first token", firstToken(capture)],
    ["output tokens", show(s.output_tokens)],
    ["tokens/s", show(s.tokens_per_second)],
    ["duration", seconds(s.duration)],
  ];
  const box = el(
    "section",
    { class: "overview" },
    el("dl", {}, facts.map(([k, v]) => [el("dt", {}, k), el("dd", { dataset: { fact: k } }, v)])),
  );
  if (!capture.timed) {
    box.append(
      el("p", { class: "note" }, "This capture has no timestamps: the timeline follows the events' order and byte offsets."),
    );
  } else if (capture.time_origin === "first_event") {
    box.append(el("p", { class: "note" }, "Times count from the first event (the request's own time is not known)."));
  }
  if (capture.fatal) {
    box.append(
      el("p", { class: "fatal" }, `Decoding stopped at byte ${capture.fatal.byte_offset}: ${capture.fatal.message}`),
    );
  }
  return box;
}

function firstToken(capture) {
  const first = capture.stats.first_token;
  if (!first) return "–";
  const at = `event #${first.event} at byte ${first.offset}`;
  return first.time === null ? at : `${seconds(first.time)} (${at})`;
}

function timeline(capture, id) {
  const rows = capture.timeline;
  const timed = capture.timed;
  const span = timed ? Math.max(...rows.map((r) => r.time ?? 0), 1e-9) : Math.max(capture.bytes, 1);
  const first = capture.stats.first_token?.event;
  const gap = capture.stats.longest_gap;
  const body = rows.map((row) => {
    const at = timed ? row.time ?? 0 : row.offset;
    const bar = el("div", { class: "bar" }, el("span", { style: `left:${((100 * at) / span).toFixed(2)}%` }));
    const classes = [`t-${row.type}`];
    if (row.event === first) classes.push("first-token");
    if (gap && row.event === gap.event) classes.push("longest-gap");
    return {
      attrs: { class: classes.join(" "), dataset: { event: row.event }, onclick: () => reveal(id, row.event) },
      cells: [
        String(row.event),
        seconds(row.time),
        seconds(row.gap),
        String(row.offset),
        row.type,
        show(row.block),
        { node: row.summary, class: "summary" },
        { node: bar, class: "bar-cell" },
      ],
    };
  });
  const t = table(["#", "time", "gap", "byte", "type", "block", "what", timed ? "when" : "where"], body, {
    class: "timeline",
    id: id("timeline", 0),
  });
  const facts = [];
  if (first !== undefined) facts.push(`first token: ${firstToken(capture)}`);
  if (gap) facts.push(`longest gap: ${seconds(gap.seconds)} before event #${gap.event}`);
  if (capture.stats.tokens_per_second !== null) {
    facts.push(`${capture.stats.tokens_per_second} output tokens/s over ${seconds(capture.stats.token_span)}`);
  }
  return section("Timeline", { class: "timeline-section" }, facts.length ? el("p", { class: "facts" }, facts.join(" · ")) : null, el("div", { class: "scroll" }, t));
}

function events(capture, id) {
  // Native events on the left, the unified events each became on the right (events
  // that came from no native event, such as the Finish of a cut stream, on their own).
  const groups = [];
  for (const row of capture.timeline) {
    const last = groups[groups.length - 1];
    if (last && last.native === row.native && row.native !== null) last.rows.push(row);
    else groups.push({ native: row.native, rows: [row] });
  }
  const listed = new Set(groups.map((g) => g.native));
  for (const native of capture.native) {
    if (!listed.has(native.index)) groups.push({ native: native.index, rows: [] });
  }
  groups.sort((a, b) => order(capture, a) - order(capture, b));
  const grid = el("div", { class: "pairs" }, el("h3", {}, "native"), el("h3", {}, "unified"));
  for (const group of groups) {
    const native = group.native === null ? null : capture.native[group.native];
    grid.append(
      el(
        "div",
        { class: "native" },
        native
          ? details(
              [el("b", {}, `${native.index} · ${native.name ?? (capture.framing === "json_array" ? "element" : "data")}`), el("span", { class: "at" }, ` bytes ${native.offset}–${native.end}`)],
              () => json(native.data),
              { attrs: { id: id("nat", native.index), class: "event" } },
            )
          : el("span", { class: "none" }, "(no native event)"),
      ),
      el(
        "div",
        { class: "unified" },
        group.rows.map((row) =>
          details(
            [el("b", {}, `#${row.event} ${row.type}`), el("span", { class: "at" }, ` ${row.summary}`)],
            () => json(capture.events[row.event]),
            { attrs: { id: id("ev", row.event), class: `event t-${row.type}` } },
          ),
        ),
      ),
    );
  }
  return section("Native and unified events", { class: "events-section" }, grid);
}

function order(capture, group) {
  if (group.rows.length) return group.rows[0].event;
  const native = capture.native[group.native];
  // A native event that became nothing sorts before the next native event's first one.
  for (let n = group.native + 1; n < capture.native.length; n++) {
    if (capture.native[n].events.length) return capture.native[n].events[0] - 0.5;
  }
  return native ? capture.timeline.length + native.index : capture.timeline.length;
}

function result(capture) {
  const r = capture.result;
  const parts = [];
  const finish = r.finish_reason;
  parts.push(
    el(
      "dl",
      { class: "finish" },
      el("dt", {}, "status"),
      el("dd", { dataset: { field: "status" } }, r.status),
      el("dt", {}, "finish"),
      el("dd", { dataset: { field: "finish" } }, finish ? JSON.stringify(finish) : "–"),
      el("dt", {}, "id"),
      el("dd", {}, show(r.id)),
      el("dt", {}, "model"),
      el("dd", {}, show(r.model)),
    ),
  );
  parts.push(el("h3", {}, "text"), el("pre", { class: "text", dataset: { field: "text" } }, r.text));
  if (r.reasoning) parts.push(el("h3", {}, "reasoning"), el("pre", { class: "text reasoning", dataset: { field: "reasoning" } }, r.reasoning));
  if (r.refusal !== null) parts.push(el("h3", {}, "refusal"), el("pre", { class: "text", dataset: { field: "refusal" } }, r.refusal));
  if (r.tool_calls.length) {
    parts.push(
      el("h3", {}, "tool calls"),
      table(
        ["name", "id", "arguments (parsed)", "error"],
        r.tool_calls.map((call) => [show(call.name), show(call.id), json(call.arguments), show(call.error)]),
        { class: "tools" },
      ),
    );
  }
  if (r.citations.length) parts.push(el("h3", {}, "citations"), json(r.citations));
  parts.push(
    el("h3", {}, "usage"),
    table(
      ["count", "value"],
      USAGE.map((name) => ({ attrs: { dataset: { usage: name } }, cells: [name, show(r.usage[name])] })),
      { class: "usage" },
    ),
    details("raw usage (the provider's own counts)", () => json(r.usage.raw), { open: true }),
  );
  if (r.error) parts.push(el("h3", {}, "error"), json(r.error));
  const media = capture.media;
  if (media.audio) {
    const a = media.audio;
    parts.push(
      el("h3", {}, "audio"),
      a.src ? el("audio", { controls: true, src: a.src, preload: "metadata" }) : el("p", { class: "note" }, a.note ?? "no audio data"),
      el("p", { class: "facts" }, `${show(a.format)} · ${show(a.sample_rate)} Hz · ${bytes(a.bytes)} · ${seconds(a.duration)}`),
    );
  }
  for (const image of media.images) {
    parts.push(
      el("h3", {}, `image #${image.index}`),
      image.src ? el("img", { src: image.src, alt: `image block ${image.index}`, class: "image" }) : el("p", { class: "note" }, image.error ?? "no image data"),
      el("p", { class: "facts" }, `${show(image.mime_type)} · ${show(image.size)} · ${bytes(image.bytes)} · ${image.final ? "final" : "partial"} (${image.partial_images} partial before)`),
    );
  }
  if (r.transcript) parts.push(el("h3", {}, "transcript"), el("pre", { class: "text" }, r.transcript.text));
  parts.push(details("the whole result (decode --result)", () => json(r)));
  return section("Result", { class: "result-section" }, parts);
}

function problems(capture, id) {
  const list = capture.problems;
  if (!list.length) return section("Warnings and errors", { class: "problems-section" }, el("p", { class: "none" }, "none"));
  return section(
    "Warnings and errors",
    { class: "problems-section" },
    table(
      ["severity", "code", "message", "byte", "frame", "event", "bytes there"],
      list.map((p) => ({
        attrs: { class: `sev-${p.severity}` },
        cells: [
          p.severity,
          p.code,
          p.message,
          show(p.byte_offset),
          show(p.event_index),
          eventLink(id, p.event),
          p.excerpt ? details("wire", () => el("pre", { class: "wire" }, p.excerpt)) : "–",
        ],
      })),
      { class: "problems" },
    ),
  );
}

function nativeFinal(capture) {
  const final = capture.native_final;
  return section(
    "Native final object",
    { class: "native-section" },
    final.error ? el("p", { class: "fatal" }, final.error) : null,
    final.object !== null ? details("as the provider's non-streaming endpoint returns it", () => json(final.object), { open: true }) : null,
  );
}

function transcodes(capture, id) {
  const list = capture.transcodes;
  const box = section("Transcoding preview", { class: "transcode-section" });
  if (!list.length) {
    box.append(el("p", { class: "none" }, capture.dialect ? "not computed for this capture" : "no dialect detected"));
    return box;
  }
  const pick = el("select", { class: "target" });
  for (const entry of list) pick.append(el("option", { value: entry.target }, entry.target + (entry.same ? " (its own dialect)" : "")));
  const out = el("div", { class: "transcode" });
  const render = () => {
    const entry = list.find((e) => e.target === pick.value);
    out.replaceChildren();
    if (entry.error) {
      out.append(el("p", { class: "fatal" }, entry.error));
      return;
    }
    const carried = entry.losses.filter((l) => l.carried).length;
    out.append(
      el("p", { class: "facts" }, `${entry.content_type} · ${bytes(entry.bytes)} · ${entry.losses.length} losses (${carried} carried)`),
      entry.losses.length
        ? table(
            ["what", "event", "type", "reason", "kind", "carried"],
            entry.losses.map((l) => [l.what, eventLink(id, l.event_index), l.event_type, l.reason, l.kind || "lost", l.carried ? "yes" : "no"]),
            { class: "losses" },
          )
        : el("p", { class: "none" }, "nothing lost"),
      el("pre", { class: "wire" }, entry.text + (entry.truncated ? "\n… (cut: the preview holds the first characters)" : "")),
    );
  };
  pick.addEventListener("change", render);
  const other = list.find((e) => !e.same) ?? list[0];
  pick.value = other.target;
  render();
  box.append(el("label", {}, "target ", pick), out);
  return box;
}
