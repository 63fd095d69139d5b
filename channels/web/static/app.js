// The web chat page of relaybot (channels/web): the conversation list of this browser, a
// conversation's messages rendered as Markdown (markdown-it, html off) and sanitised
// (DOMPurify), its events read as Server-Sent Events from a fetch stream (so the access token
// can ride in a header), Stop, /new, approvals as buttons, and files by upload.
"use strict";
(() => {
  const md = window.markdownit({ html: false, linkify: true });
  const $ = (id) => document.getElementById(id);
  const saved = (key) => "relaybot_" + key + ":" + location.pathname;  // each page's own
  const state = { conv: null, events: null, busy: false, token: localStorage.getItem(saved("token")) || "" };

  function headers(extra) {
    const h = Object.assign({ "X-Relaybot": "1" }, extra || {});
    if (state.token) h.Authorization = "Bearer " + state.token;
    return h;
  }

  async function api(method, path, body, signal) {
    const init = { method, headers: headers(), credentials: "same-origin", signal };
    if (body instanceof FormData) init.body = body;
    else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch("api/" + path, init);  // under the page's own path
    if (response.status === 401) {
      $("signin").hidden = false;
      throw new Error("sign in first");
    }
    if (!response.ok) {
      let why = response.statusText;
      try { why = (await response.json()).error || why; } catch (e) { /* not JSON */ }
      throw new Error(why);
    }
    return path.endsWith("/events") ? response : response.json();
  }

  function notice(text) { $("notice").textContent = text || ""; }

  function setBusy(busy) {
    state.busy = busy;
    document.body.dataset.busy = busy ? "1" : "0";
    $("stop").hidden = !busy;
  }

  function messageEl(id, role) {
    let el = $("messages").querySelector('[data-id="' + CSS.escape(id) + '"]');
    if (!el) {
      el = document.createElement("div");
      el.className = "message " + role;
      el.dataset.id = id;
      $("messages").appendChild(el);
    }
    return el;
  }

  function show(id, role, text) {
    const el = messageEl(id, role);
    if (role === "user") el.textContent = text;
    else el.innerHTML = DOMPurify.sanitize(md.render(text));
    const box = $("messages");
    box.scrollTop = box.scrollHeight;
  }

  function approval(id, text) {
    const el = document.createElement("div");
    el.className = "approval";
    el.dataset.approval = id;
    const prompt = document.createElement("div");
    prompt.textContent = text;
    el.appendChild(prompt);
    for (const [label, approved] of [["Approve", true], ["Deny", false]]) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = label;
      button.addEventListener("click", () => {
        api("POST", "approvals/" + encodeURIComponent(id), { approved }).catch((e) => notice(e.message));
      });
      el.appendChild(button);
    }
    $("messages").appendChild(el);
  }

  function handle(event) {
    if (event.type === "user") show(event.id, "user", event.text);
    else if (event.type === "send" || event.type === "edit") show(event.id, "bot", event.text);
    else if (event.type === "delete") messageEl(event.id, "bot").remove();
    else if (event.type === "busy") setBusy(event.busy);
    else if (event.type === "approval") approval(event.id, event.text);
    else if (event.type === "approved") {
      const el = $("messages").querySelector('[data-approval="' + CSS.escape(event.id) + '"]');
      if (el) {
        el.querySelectorAll("button").forEach((b) => b.remove());
        const outcome = document.createElement("div");
        outcome.textContent = event.approved === true ? "Approved" : event.approved === false ? "Denied" : "No answer";
        el.appendChild(outcome);
      }
    }
  }

  async function follow(conv, controller) {
    // One conversation's event stream (text/event-stream), read until it ends or is aborted.
    const response = await api("GET", "conversations/" + conv + "/events", undefined, controller.signal);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data) handle(JSON.parse(data));
      }
    }
  }

  async function open(conv) {
    if (state.events) state.events.abort();
    state.conv = conv;
    localStorage.setItem(saved("conversation"), conv);
    document.querySelectorAll("#conversations li").forEach((li) => li.classList.toggle("current", li.dataset.id === conv));
    const controller = new AbortController();
    state.events = controller;
    const following = follow(conv, controller);  // subscribe first: no event is missed
    const transcript = await api("GET", "conversations/" + conv);
    $("messages").textContent = "";
    for (const m of transcript.messages) show(m.id, m.role, m.text);
    setBusy(transcript.busy);
    following.catch(() => {}).then(() => {
      if (state.events === controller && !controller.signal.aborted) setTimeout(() => open(conv), 1000);
    });
  }

  function listConversations(conversations) {
    const list = $("conversations");
    list.textContent = "";
    for (const c of conversations) {
      const li = document.createElement("li");
      li.dataset.id = c.id;
      if (c.id === state.conv) li.classList.add("current");  // kept across a refresh
      const title = document.createElement("span");
      title.textContent = c.title || "New chat";
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "delete";
      remove.title = "Delete this conversation";
      remove.textContent = "×";
      remove.addEventListener("click", (e) => {
        e.stopPropagation();
        forget(c.id).catch((err) => notice(err.message));
      });
      li.append(title, remove);
      li.addEventListener("click", () => open(c.id));
      list.appendChild(li);
    }
  }

  async function refresh() {
    const session = await api("GET", "session");
    listConversations(session.conversations);
    return session.conversations;
  }

  async function newChat() {
    const created = await api("POST", "conversations");
    await refresh();
    await open(created.id);
  }

  async function forget(conv) {
    // Delete a conversation (after asking): it leaves the list; the page opens another.
    if (!window.confirm("Delete this conversation? Its messages and history are removed.")) return;
    await api("DELETE", "conversations/" + conv);
    const left = await refresh();
    if (conv !== state.conv) return;
    if (left.length) await open(left[0].id);
    else await newChat();
  }

  async function send() {
    const text = $("input").value;
    const files = $("files").files;
    if (text.trim().toLowerCase() === "/new") {
      $("input").value = "";
      return newChat();
    }
    if (!text.trim() && !files.length) return;
    let body = { text };
    if (files.length) {
      body = new FormData();
      body.append("text", text);
      for (const f of files) body.append("file", f, f.name);
    }
    $("input").value = "";
    $("files").value = "";
    await api("POST", "conversations/" + state.conv + "/messages", body);
    refresh();
  }

  async function start() {
    notice("");
    const conversations = await refresh();
    $("signin").hidden = true;
    const last = localStorage.getItem(saved("conversation"));
    if (conversations.some((c) => c.id === last)) await open(last);
    else if (conversations.length) await open(conversations[0].id);
    else await newChat();
  }

  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send().catch((err) => notice(err.message)); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send().catch((err) => notice(err.message)); }
  });
  $("stop").addEventListener("click", () => api("POST", "conversations/" + state.conv + "/stop").catch((e) => notice(e.message)));
  $("new-chat").addEventListener("click", () => newChat().catch((e) => notice(e.message)));
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token").value.trim();
    localStorage.setItem(saved("token"), state.token);
    start().catch((err) => notice(err.message));
  });
  start().catch((err) => notice(err.message));
})();
