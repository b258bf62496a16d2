// Two captures side by side: finish, usage, text (word by word) and events.

import { USAGE } from "ps/capture.js";
import { el, section, show, table } from "ps/view.js";

const MAX_CELLS = 4_000_000; // the largest LCS table computed (words or events squared)

// The longest common subsequence of two arrays as operations: ["=", a, b], ["-", a],
// ["+", b]. Past MAX_CELLS, everything of a is deleted and everything of b inserted.
export function diffSeq(a, b, same = (x, y) => x === y) {
  const n = a.length;
  const m = b.length;
  let start = 0;
  while (start < n && start < m && same(a[start], b[start])) start++;
  let endA = n;
  let endB = m;
  while (endA > start && endB > start && same(a[endA - 1], b[endB - 1])) {
    endA--;
    endB--;
  }
  const ops = [];
  for (let i = 0; i < start; i++) ops.push(["=", a[i], b[i]]);
  const rows = endA - start;
  const cols = endB - start;
  if (rows * cols > MAX_CELLS) {
    for (let i = start; i < endA; i++) ops.push(["-", a[i]]);
    for (let j = start; j < endB; j++) ops.push(["+", b[j]]);
  } else {
    const width = cols + 1;
    const len = new Uint32Array((rows + 1) * width);
    for (let i = rows - 1; i >= 0; i--) {
      for (let j = cols - 1; j >= 0; j--) {
        len[i * width + j] = same(a[start + i], b[start + j])
          ? len[(i + 1) * width + j + 1] + 1
          : Math.max(len[(i + 1) * width + j], len[i * width + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < rows && j < cols) {
      if (same(a[start + i], b[start + j])) {
        ops.push(["=", a[start + i], b[start + j]]);
        i++;
        j++;
      } else if (len[(i + 1) * width + j] >= len[i * width + j + 1]) {
        ops.push(["-", a[start + i]]);
        i++;
      } else {
        ops.push(["+", b[start + j]]);
        j++;
      }
    }
    for (; i < rows; i++) ops.push(["-", a[start + i]]);
    for (; j < cols; j++) ops.push(["+", b[start + j]]);
  }
  for (let i = endA, j = endB; i < n; i++, j++) ops.push(["=", a[i], b[j]]);
  return ops;
}

function words(text) {
  return text.split(/(\s+)/).filter((w) => w !== "");
}

export function renderDiff(captures, initial = [0, 1]) {
  const root = el("article", { class: "diff" });
  const pickA = picker(captures, initial[0]);
  const pickB = picker(captures, initial[1]);
  const out = el("div", {});
  const render = () => {
    out.replaceChildren(...compare(captures[+pickA.value], captures[+pickB.value]));
  };
  pickA.addEventListener("change", render);
  pickB.addEventListener("change", render);
  root.append(el("p", { class: "pick" }, el("label", {}, "A ", pickA), " ", el("label", {}, "B ", pickB)), out);
  render();
  return root;
}

function picker(captures, selected) {
  const select = el("select", {});
  captures.forEach((c, n) => select.append(el("option", { value: n }, `${n + 1}. ${c.name}`)));
  select.value = String(Math.min(selected, captures.length - 1));
  return select;
}

function row(name, a, b) {
  const changed = JSON.stringify(a) !== JSON.stringify(b);
  const cell = (v) => (v === null || v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v));
  return { attrs: { class: changed ? "changed" : "same", dataset: { field: name } }, cells: [name, cell(a), cell(b)] };
}

function compare(a, b) {
  const ra = a.result;
  const rb = b.result;
  const finish = table(
    ["", "A", "B"],
    [
      row("capture", a.name, b.name),
      row("dialect", a.dialect, b.dialect),
      row("model", ra.model, rb.model),
      row("status", ra.status, rb.status),
      row("finish.unified", ra.finish_reason?.unified, rb.finish_reason?.unified),
      row("finish.raw", ra.finish_reason?.raw, rb.finish_reason?.raw),
      row("events", a.stats.events, b.stats.events),
      row("tool calls", ra.tool_calls.map((c) => c.name), rb.tool_calls.map((c) => c.name)),
    ],
    { class: "diff-finish" },
  );
  const usage = table(
    ["", "A", "B"],
    USAGE.map((name) => row(name, ra.usage[name], rb.usage[name])),
    { class: "diff-usage" },
  );
  return [
    section("Finish", {}, finish),
    section("Usage", {}, usage),
    section("Text", {}, textDiff(ra.text, rb.text)),
    section("Events", {}, eventDiff(a, b)),
  ];
}

function textDiff(textA, textB) {
  const left = el("pre", { class: "text side", dataset: { side: "a" } });
  const right = el("pre", { class: "text side", dataset: { side: "b" } });
  let removed = 0;
  let added = 0;
  for (const op of diffSeq(words(textA), words(textB))) {
    if (op[0] === "=") {
      left.append(op[1]);
      right.append(op[2]);
    } else if (op[0] === "-") {
      left.append(el("del", {}, op[1]));
      removed++;
    } else {
      right.append(el("ins", {}, op[1]));
      added++;
    }
  }
  const same = textA === textB;
  return [
    el("p", { class: "facts" }, same ? "the texts are the same" : `${removed} words only in A, ${added} only in B`),
    el("div", { class: "sides" }, left, right),
  ];
}

function eventDiff(a, b) {
  // Events compared by type and block (their contents differ between any two replies).
  // (A block's start is compared by its kind too: "#0 text" against "#0 reasoning".)
  const kind = (r) => (r.type === "block-start" ? ` ${r.summary.split(" ")[1]}` : "");
  const sig = (capture) => capture.timeline.map((r) => ({ key: `${r.type}#${show(r.block)}${kind(r)}`, row: r }));
  const ops = diffSeq(sig(a), sig(b), (x, y) => x.key === y.key);
  const rows = ops.map((op) => {
    const [kind, x, y] = op;
    const cell = (item) => (item ? `#${item.row.event} ${item.row.type} ${item.row.summary}` : "");
    if (kind === "=") return { attrs: { class: "same" }, cells: ["", cell(x), cell(y)] };
    if (kind === "-") return { attrs: { class: "removed" }, cells: ["−", cell(x), ""] };
    return { attrs: { class: "added" }, cells: ["+", "", cell(x)] };
  });
  return el("div", { class: "scroll" }, table(["", "A", "B"], rows, { class: "diff-events" }));
}
