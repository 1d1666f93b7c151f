// AURA node dashboard: polls /dashboard/state (docs/dashboard.md) and
// renders it. No framework; uPlot draws the time series.
(function () {
  "use strict";

  // POLL_MS is the time between two polls: twice the server's default
  // sample period, so each poll brings about two new samples and an open
  // page costs the node one small request every two seconds.
  var POLL_MS = 2000;
  // The token lives in this tab's sessionStorage only: never in a URL
  // (URLs end up in logs and history), never sent anywhere but this node.
  var TOKEN_KEY = "aura.dashboard.token";
  var PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
    "#9333ea", "#0d9488", "#ea580c", "#4f46e5"];
  var UNOWNED = "#d1d5db";
  // ROWS bounds the rows of each planner table: the newest first; the
  // state carries up to 256 of each (planner.MaxDecisions).
  var ROWS = 50;

  var body = document.body;
  var polls = 0;
  var charts = {};
  var timer = null;
  var last = null; // the last state, re-rendered when the filter changes

  function $(id) { return document.getElementById(id); }
  function color(i) {
    if (i < 0) return UNOWNED;
    return i < PALETTE.length ? PALETTE[i] : "hsl(" + ((i * 137.5) % 360) + ",60%,45%)";
  }
  function text(s) { return document.createTextNode(s == null ? "" : String(s)); }
  function cell(tr, v, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.appendChild(v instanceof Node ? v : text(v));
    tr.appendChild(td);
    return td;
  }
  function fill(tbody, rows, render) {
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    rows.forEach(function (r) { tbody.appendChild(render(r)); });
  }
  function num(v, digits) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
    return v.toFixed(digits == null ? 2 : digits);
  }
  function clock(ms) { return new Date(ms).toLocaleTimeString(); }
  function owner(roster, i) { return i >= 0 && i < roster.length && roster[i] ? roster[i] : (i < 0 ? "MN CAS" : "#" + i); }
  function node(name) { return name ? name : "MN CAS"; }

  function token() { try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; } }

  function poll() {
    clearTimeout(timer);
    var headers = { "Accept": "application/json" };
    var tok = token();
    if (tok) headers["Authorization"] = "Bearer " + tok;
    fetch("/dashboard/state", { headers: headers, cache: "no-store", credentials: "omit" })
      .then(function (r) {
        if (r.status === 401) {
          showAuth(tok ? "the node refused this token" : "");
          return null;
        }
        if (!r.ok) {
          return r.json().then(function (e) { throw new Error(r.status + " " + (e.code || "") + ": " + (e.message || "")); },
            function () { throw new Error("HTTP " + r.status); });
        }
        return r.json();
      })
      .then(function (st) {
        if (!st) return;
        $("auth").hidden = true;
        $("error").hidden = true;
        render(st);
        polls++;
        body.setAttribute("data-polls", polls);
      })
      .catch(function (err) {
        $("error").hidden = false;
        $("error").textContent = "cannot read the node's state: " + err.message;
        body.setAttribute("data-status", "unreachable");
      })
      .then(function () { timer = setTimeout(poll, POLL_MS); });
  }

  function showAuth(msg) {
    $("auth").hidden = false;
    $("autherr").textContent = msg;
    body.setAttribute("data-status", "unauthorized");
  }
  $("auth").addEventListener("submit", function (ev) {
    ev.preventDefault();
    try { sessionStorage.setItem(TOKEN_KEY, $("token").value.trim()); } catch (e) { /* private mode: no storage */ }
    $("token").value = "";
    poll();
  });

  $("kind").addEventListener("change", function () { if (last) renderPlanner(last); });

  function render(st) {
    last = st;
    $("node").textContent = st.node;
    document.title = "AURA " + st.node;
    var badge = $("status");
    badge.textContent = st.status;
    badge.className = "badge " + st.status;
    badge.title = st.reason || "";
    $("updated").textContent = "updated " + clock(st.now_unix_ms);
    var om = st.ownermap;
    $("summary").textContent = "epoch " + om.epoch + " · " + om.cohorts + " cohorts · " + st.members.length + " members";
    body.setAttribute("data-status", st.status);
    body.setAttribute("data-samples", st.samples_taken);
    body.setAttribute("data-members", st.members.length);
    body.setAttribute("data-cells", om.cells.length);
    body.setAttribute("data-epoch", om.epoch);
    renderMembers(st);
    renderGrid(om);
    renderSeries(st);
    renderPlanner(st);
    renderStuck(st);
  }

  function renderMembers(st) {
    $("memberepoch").textContent = "membership epoch " + st.membership_epoch;
    fill($("members").tBodies[0], st.members, function (m) {
      var tr = document.createElement("tr");
      tr.className = "member" + (m.self ? " self" : "") + (m.leaving ? " leaving" : "");
      tr.setAttribute("data-name", m.name);
      var name = document.createElement("span");
      if (m.slot >= 0) {
        var sw = document.createElement("span");
        sw.className = "swatch";
        sw.style.background = color(m.slot);
        name.appendChild(sw);
      }
      name.appendChild(text(m.name + (m.self ? " (this node)" : "")));
      if (m.planner) {
        var star = document.createElement("span");
        star.className = "star";
        star.title = "hosts the planner";
        star.textContent = " ★ planner";
        name.appendChild(star);
      }
      cell(tr, name);
      cell(tr, (m.roles || []).join(", "));
      cell(tr, m.slot >= 0 ? m.slot : "–", "num");
      cell(tr, m.cohorts, "num");
      cell(tr, m.key_groups, "num");
      cell(tr, m.gossip_addr);
      cell(tr, m.remote_addr);
      cell(tr, m.leaving ? "leaving" : "live");
      return tr;
    });
  }

  function renderGrid(om) {
    var legend = $("legend");
    while (legend.firstChild) legend.removeChild(legend.firstChild);
    var owners = {};
    om.cells.forEach(function (c) { owners[c.o] = (owners[c.o] || 0) + 1; });
    om.roster.forEach(function (name, i) {
      if (!name) return;
      var it = document.createElement("span");
      it.className = "item";
      var sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = color(i);
      it.appendChild(sw);
      it.appendChild(text(name + " (" + (owners[i] || 0) + " cells)"));
      legend.appendChild(it);
    });
    $("mapinfo").textContent = "OwnerMap epoch " + om.epoch + ", " + om.cohorts + " cohorts over " + om.key_groups +
      " key groups" + (om.per_cell > 1 ? ", " + om.per_cell + " key groups per cell" : ", one key group per cell");
    var grid = $("grid");
    var frag = document.createDocumentFragment();
    om.cells.forEach(function (c) {
      var d = document.createElement("div");
      d.className = "cell" + (c.mixed ? " mixed" : "");
      d.style.background = color(c.o);
      d.title = "key group " + c.kg + " · cohort " + c.c + " · owner " + owner(om.roster, c.o) + (c.mixed ? " (cell has several owners)" : "");
      frag.appendChild(d);
    });
    while (grid.firstChild) grid.removeChild(grid.firstChild);
    grid.appendChild(frag);
    $("gridnote").textContent = om.cells.length ? "Key groups in ascending order (the workload's encoding: table, then partition), colored by owner. Key groups in no cohort follow the fallback table" +
      (om.fallback.length ? " (" + om.fallback.length + " partitions)" : "") + " and the memory node's CAS path."
      : "No cohort is owned yet: every lock takes the memory node's CAS path until the planner publishes a map.";
  }

  function chart(id, title, series, data) {
    var el = $(id);
    var width = Math.max(320, el.clientWidth || 480);
    if (charts[id] && charts[id].width !== width) {
      charts[id].destroy();
      delete charts[id];
    }
    if (!charts[id]) {
      var opts = { title: title, width: width, height: 200, series: [{}].concat(series),
        scales: { x: { time: true } }, axes: [{}, { size: 60 }], cursor: { drag: { x: false, y: false } } };
      charts[id] = new uPlot(opts, data, el);
    } else {
      charts[id].setData(data);
    }
  }

  function renderSeries(st) {
    var s = st.series;
    var t = s.t.map(function (ms) { return ms / 1000; });
    $("seriesinfo").textContent = s.t.length + " samples, one per " + (st.sample_period_ms / 1000) + " s (at most " + st.max_samples + ")";
    var pct = s.local_hit.map(function (v) { return v == null ? null : 100 * v; });
    chart("c-tps", "throughput (txn/s)", [
      { label: "committed/s", stroke: PALETTE[0], width: 2 },
      { label: "aborted/s", stroke: PALETTE[1] }], [t, s.tps, s.aborts_per_s]);
    chart("c-local", "LOCAL hit (% of locks)", [
      { label: "local hit %", stroke: PALETTE[2], width: 2 }], [t, pct]);
    chart("c-atomic", "MN atomics per committed txn", [
      { label: "CAS+FAA / txn", stroke: PALETTE[3], width: 2 }], [t, s.atomic_per_txn]);
    chart("c-moves", "ownership changes and migrations", [
      { label: "cohorts changing owner", stroke: PALETTE[4], width: 2 },
      { label: "migrations finished", stroke: PALETTE[5] },
      { label: "frozen here", stroke: PALETTE[1] }], [t, s.owner_changes, s.migrations, s.frozen]);
  }

  function renderPlanner(st) {
    var p = st.planner;
    $("plannerwhere").textContent = st.planner_node ? "runs on " + st.planner_node : "no node may host it";
    var note = $("plannernote");
    if (!p) {
      note.className = "muted";
      note.textContent = st.planner_node
        ? "The planner's decisions live in its actor on " + st.planner_node + ": open that node's dashboard to see them."
        : "No live member advertises the planner role.";
    } else {
      note.className = "";
      note.textContent = p.total_decisions + " decisions and " + p.total_migrations + " migrations since this planner started" +
        (p.round_active ? "; a round of migrations is running" : "") + (p.stuck ? "; " + p.stuck + " stuck migration(s) below" : "") + ".";
    }
    var kind = $("kind").value;
    var all = p ? p.decisions.filter(function (d) { return !kind || d.kind === kind; }) : [];
    var ds = all.slice(-ROWS).reverse();
    $("decisioncount").textContent = p ? "showing " + ds.length + " of the last " + all.length : "";
    fill($("decisions").tBodies[0], ds, function (d) {
      var tr = document.createElement("tr");
      tr.className = "decision " + d.kind;
      cell(tr, clock(d.unix_ms));
      cell(tr, d.epoch, "num");
      cell(tr, d.kind);
      cell(tr, d.cohort, "num");
      cell(tr, node(d.from) + " → " + node(d.to));
      cell(tr, d.reason + (d.forced ? " (forced)" : ""));
      var ev = d.kind === "evict";
      cell(tr, ev ? "–" : num(d.benefit), "num");
      cell(tr, ev ? "–" : num(d.terms.s_atomic), "num");
      cell(tr, ev ? "–" : num(d.terms.c_rpc), "num");
      cell(tr, ev ? "–" : num(d.terms.c_move), "num");
      cell(tr, ev ? "–" : num(d.terms.c_load), "num");
      cell(tr, d.stay ? num(d.stay.s_atomic - d.stay.c_rpc - d.stay.c_move - d.stay.c_load) : "–", "num");
      return tr;
    });
    var ms = p ? p.migrations.slice(-ROWS).reverse() : [];
    fill($("migrations").tBodies[0], ms, function (m) {
      var tr = document.createElement("tr");
      tr.className = "migration" + (m.stuck ? " stuck" : "") + (m.outcome === "kept" ? " kept" : "");
      cell(tr, clock(m.unix_ms));
      cell(tr, m.epoch, "num");
      cell(tr, m.cohort, "num");
      cell(tr, node(m.from) + " → " + node(m.to));
      cell(tr, m.outcome === "kept" ? "rolled back" : m.outcome);
      cell(tr, m.freeze_us, "num");
      cell(tr, m.drain_us, "num");
      cell(tr, m.aborted_holders, "num");
      cell(tr, (m.stuck ? "STUCK: " : "") + (m.reason || ""));
      return tr;
    });
  }

  function renderStuck(st) {
    var msgs = [];
    if (st.local.stuck) {
      msgs.push("Stuck handoff: this node has held " + st.local.frozen + " frozen cohort(s) for " + Math.round(st.local.frozen_for_s) + " s.");
    }
    if (st.planner && st.planner.stuck) {
      msgs.push(st.planner.stuck + " of the planner's last migrations missed a phase deadline (rows marked STUCK).");
    }
    var b = $("stuck");
    b.hidden = msgs.length === 0;
    b.textContent = msgs.join(" ");
    body.setAttribute("data-stuck", msgs.length ? "1" : "0");
  }

  poll();
})();
