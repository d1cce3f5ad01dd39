// dlock top: replace the view with each one the server sends (server-sent
// events); the page without this script is the snapshot it was served as.
(function () {
  var live = document.getElementById("live");
  var view = document.getElementById("view");
  var open = {}; // the unlock boxes open, by lock name, kept across updates
  function keepOpen() {
    open = {};
    view.querySelectorAll("tr.lock").forEach(function (tr) {
      var d = tr.querySelector("details");
      var input = tr.querySelector("input[name=confirm]");
      if (d && d.open) open[tr.dataset.name] = input ? input.value : "";
    });
  }
  function restoreOpen() {
    view.querySelectorAll("tr.lock").forEach(function (tr) {
      if (!(tr.dataset.name in open)) return;
      var d = tr.querySelector("details");
      var input = tr.querySelector("input[name=confirm]");
      if (d) d.open = true;
      if (input) input.value = open[tr.dataset.name];
    });
  }
  var es = new EventSource("/events" + location.search);
  es.addEventListener("view", function (e) {
    var active = document.activeElement && view.contains(document.activeElement);
    if (active) return; // someone is typing a name to unlock: do not pull the box away
    keepOpen();
    view.innerHTML = JSON.parse(e.data).html;
    restoreOpen();
    live.textContent = "live";
    live.className = "live on";
  });
  es.onerror = function () {
    live.textContent = "page server gone: retrying";
    live.className = "live off";
  };
  view.addEventListener("submit", function (e) {
    var f = e.target;
    if (!f.classList.contains("unlock")) return;
    e.preventDefault();
    fetch(f.action, { method: "POST", headers: { "X-Dlock-Unlock": "1" }, body: new URLSearchParams(new FormData(f)) })
      .then(function (r) { return r.text().then(function (t) { alert(t); }); });
  });
})();
