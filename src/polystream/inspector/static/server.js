// What a page served by polystream can do besides showing its captures: decode files
// the user opens (the server decodes them), and, on the gateway, list the streams
// passing through and follow one live.

import { bytes, el, section, show, table } from "ps/view.js";

const KEY = "polystream-inspect-key";

export function serverTools(app) {
  const server = app.server;
  if (!server) return [];
  const tools = [];
  if (server.decode) {
    const input = el("input", { type: "file", multiple: true, id: "open-file" });
    input.addEventListener("change", async () => {
      for (const file of input.files) await decodeFile(app, file);
      input.value = "";
    });
    tools.push(el("label", { class: "open" }, "Open capture… ", input));
  }
  if (server.auth) {
    const key = el("input", { type: "password", placeholder: "gateway key", id: "key", value: sessionStorage.getItem(KEY) ?? "" });
    key.addEventListener("change", () => {
      sessionStorage.setItem(KEY, key.value);
      if (app.tab === "streams") app.show("streams");
    });
    tools.push(el("label", {}, "key ", key));
  }
  tools.push(el("span", { id: "status", role: "status" }));
  return tools;
}

function say(text) {
  const status = document.getElementById("status");
  if (status) status.textContent = text;
}

function headers(app) {
  const key = app.server?.auth ? sessionStorage.getItem(KEY) : null;
  return key ? { authorization: `Bearer ${key}` } : {};
}

async function call(app, url, init = {}) {
  const response = await fetch(url, { ...init, headers: { ...headers(app), ...(init.headers ?? {}) } });
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error?.message ?? body.error ?? `HTTP ${response.status}`);
  return body;
}

async function decodeFile(app, file) {
  say(`decoding ${file.name}…`);
  try {
    const url = `${app.server.decode}?name=${encodeURIComponent(file.name)}`;
    app.add(await call(app, url, { method: "POST", body: await file.arrayBuffer() }));
    say("");
  } catch (error) {
    say(`${file.name}: ${error.message}`);
  }
}

export function renderStreams(app) {
  const box = section("Streams passing through the gateway", { class: "streams" });
  const list = el("div", {}, el("p", { class: "none" }, "loading…"));
  const refresh = el("button", { type: "button", onclick: () => load() }, "refresh");
  box.append(el("p", {}, refresh), list);
  const load = async () => {
    if (app.server.auth && !sessionStorage.getItem(KEY)) {
      list.replaceChildren(el("p", { class: "note" }, "Enter the gateway's client key above to list your streams."));
      return;
    }
    try {
      const body = await call(app, app.server.streams);
      const rows = body.streams.map((s) => [
        el("button", { type: "button", class: "follow", onclick: () => follow(app, s.id) }, "inspect"),
        s.id,
        show(s.dialect),
        new Date(s.started * 1000).toLocaleTimeString(),
        String(s.entries),
        bytes(s.bytes),
        s.finished ? "finished" : "live",
      ]);
      list.replaceChildren(
        rows.length
          ? table(["", "stream", "dialect", "started", "events", "size", "state"], rows, { class: "stream-list" })
          : el("p", { class: "none" }, "no stream journalled yet"),
      );
      say("");
    } catch (error) {
      list.replaceChildren(el("p", { class: "fatal" }, error.message));
    }
  };
  load();
  return box;
}

async function follow(app, id) {
  const url = `${app.server.streams}/${encodeURIComponent(id)}`;
  let n = null;
  for (;;) {
    let body;
    try {
      body = await call(app, url);
    } catch (error) {
      say(`${id}: ${error.message}`);
      break;
    }
    if (n === null) {
      n = app.add(body.capture);
      app.live.set(n, id);
      app.tabs();
    } else {
      app.replace(n, body.capture);
    }
    if (body.finished) break;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  if (n !== null) {
    app.live.delete(n);
    app.tabs();
  }
}
