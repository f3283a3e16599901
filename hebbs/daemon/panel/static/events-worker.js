// One event stream for every open tab of the panel. Each page holding its own /events connection
// would use one of the browser's six HTTP/1.1 connections to this host: a seventh tab never loaded.
// This shared worker keeps one EventSource and relays what it hears to every tab connected to it.
"use strict";
const ports = new Set();
let source = null;
let state = { type: "connecting" };

function broadcast(message) {
  ports.forEach((port) => port.postMessage(message));
}

function connect() {
  state = { type: "connecting" };
  source = new EventSource("/events");
  source.addEventListener("open", () => { state = { type: "open" }; broadcast(state); });
  // CLOSED: the daemon answered but refused the stream (a restarted daemon has a new token), so
  // the browser will not retry; CONNECTING: no answer yet, it retries by itself.
  source.addEventListener("error", () => {
    state = { type: "error", closed: source.readyState === EventSource.CLOSED };
    broadcast(state);
  });
  source.addEventListener("change", (event) => broadcast({ type: "change", data: event.data }));
}

self.addEventListener("connect", (event) => {
  const port = event.ports[0];
  ports.add(port);
  port.addEventListener("message", (message) => {
    if (message.data === "bye") ports.delete(port);
  });
  port.start();
  // A stream refused earlier may be accepted now (the panel was opened again with the new token).
  if (!source || source.readyState === EventSource.CLOSED) connect();
  port.postMessage(state);
});
