// The vkllm chat page: talks to this server's own API (/props and
// /v1/chat/completions with stream: true), with the API key the user enters.
"use strict";

const $ = (id) => document.getElementById(id);
const els = {
  messages: $("messages"), input: $("input"), send: $("send"), stop: $("stop"), clear: $("clear"),
  composer: $("composer"), temperature: $("temperature"), maxTokens: $("max-tokens"),
  system: $("system"), apiKey: $("api-key"), modelName: $("model-name"), ctxSize: $("ctx-size"), status: $("status"),
};

let history = [];   // the conversation sent with each request: {role, content}
let running = null; // the AbortController of the answer being streamed

els.apiKey.value = sessionStorage.getItem("vkllm-api-key") || "";
els.apiKey.addEventListener("change", () => {
  sessionStorage.setItem("vkllm-api-key", els.apiKey.value);
  loadInfo();
});

function headers() {
  const h = { "Content-Type": "application/json" };
  if (els.apiKey.value) h["Authorization"] = "Bearer " + els.apiKey.value;
  return h;
}

function setStatus(text, isError) {
  els.status.textContent = text;
  els.status.style.color = isError ? "var(--err)" : "";
}

// errorText returns the message of an API error body, or the raw text.
function errorText(body, status) {
  try {
    const e = JSON.parse(body).error;
    if (e && e.message) return e.message;
  } catch (_) { /* not JSON */ }
  return body || "HTTP " + status;
}

// loadInfo shows the model's name and context size from /props, waiting
// while the model loads.
async function loadInfo() {
  let resp;
  try {
    resp = await fetch("/props", { headers: headers() });
  } catch (err) {
    setStatus("server unreachable", true);
    setTimeout(loadInfo, 2000);
    return;
  }
  const body = await resp.text();
  if (resp.status === 503) {
    setStatus("loading the model…");
    setTimeout(loadInfo, 1000);
    return;
  }
  if (resp.status === 401) {
    setStatus("enter the server's API key", true);
    els.apiKey.focus();
    return;
  }
  if (!resp.ok) {
    setStatus(errorText(body, resp.status), true);
    return;
  }
  const p = JSON.parse(body);
  els.modelName.textContent = p.model;
  els.ctxSize.textContent = p.n_ctx;
  document.title = p.model + " · vkllm";
  setStatus(p.device && p.device.name ? "ready on " + p.device.name : "ready");
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const span = document.createElement("span");
  span.className = "text";
  span.textContent = text;
  div.appendChild(span);
  els.messages.appendChild(div);
  els.messages.scrollTop = els.messages.scrollHeight;
  return div;
}

function setBusy(busy) {
  els.send.disabled = busy;
  els.stop.disabled = !busy;
}

// speedText describes an answer's speed from the server's timings, or from
// the client's own clock when there are none.
function speedText(t, tokens, seconds, stopped) {
  let s;
  if (t) {
    s = `${t.predicted_n} tokens · ${t.predicted_per_second.toFixed(1)} tokens/s` +
      ` · prompt ${t.prompt_n} tokens at ${t.prompt_per_second.toFixed(1)} tokens/s`;
    if (t.cache_n) s += ` (${t.cache_n} cached)`;
  } else {
    s = `${tokens} chunks in ${seconds.toFixed(1)} s`;
    if (seconds > 0) s += ` · ${(tokens / seconds).toFixed(1)} tokens/s`;
  }
  return stopped ? s + " · stopped" : s;
}

// stream sends the conversation and appends the answer to div as it comes.
async function stream(div) {
  const text = div.querySelector(".text");
  const messages = [];
  if (els.system.value.trim()) messages.push({ role: "system", content: els.system.value });
  messages.push(...history);
  const req = {
    messages, stream: true, stream_options: { include_usage: true },
    temperature: Number(els.temperature.value),
    max_tokens: Math.max(1, Math.floor(Number(els.maxTokens.value) || 1)),
  };
  running = new AbortController();
  const t0 = performance.now();
  let answer = "", chunks = 0, timings = null, stopped = false, failed = null;
  try {
    const resp = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(req), signal: running.signal,
    });
    if (!resp.ok) throw new Error(errorText(await resp.text(), resp.status));
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let event = "message", data = "";
        for (const line of frame.split("\n")) {
          if (line.startsWith("event: ")) event = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (data === "[DONE]") continue;
        const msg = JSON.parse(data);
        if (event === "error" || msg.error) throw new Error(msg.error ? msg.error.message : data);
        if (msg.timings) timings = msg.timings;
        for (const ch of msg.choices || []) {
          const piece = ch.delta && ch.delta.content;
          if (piece) {
            answer += piece;
            chunks++;
            text.textContent = answer;
            els.messages.scrollTop = els.messages.scrollHeight;
          }
        }
      }
    }
  } catch (err) {
    if (err.name === "AbortError") stopped = true;
    else failed = err.message;
  } finally {
    running = null;
  }
  div.classList.remove("streaming");
  if (failed) {
    div.classList.add("error");
    text.textContent = answer + (answer ? "\n" : "") + "error: " + failed;
    return;
  }
  history.push({ role: "assistant", content: answer });
  const speed = document.createElement("span");
  speed.className = "speed";
  speed.textContent = speedText(timings, chunks, (performance.now() - t0) / 1000, stopped);
  div.appendChild(speed);
}

els.composer.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const content = els.input.value;
  if (!content.trim() || running) return;
  els.input.value = "";
  history.push({ role: "user", content });
  addMessage("user", content);
  const div = addMessage("assistant", "");
  div.classList.add("streaming");
  setBusy(true);
  await stream(div);
  setBusy(false);
  els.input.focus();
});

els.input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    els.composer.requestSubmit();
  }
});

els.stop.addEventListener("click", () => { if (running) running.abort(); });

els.clear.addEventListener("click", () => {
  if (running) running.abort();
  history = [];
  els.messages.textContent = "";
});

loadInfo();
