"""The report's side-by-side players in headless Chromium: the page loads, every player's source is
an mp4 of the report's videos/ folder that Chromium decodes (metadata loaded, no media error),
and the page's synced playback starts: every player plays with the baseline's clock, and a
follower put 0.3 s off it while playing is brought back (within 0.1 s before the clip ends; the
clip is 1.6 s and a loaded machine's seeks can outlast it, so up to 3 tries from the start), and
pausing the baseline pauses the rest. The probe is a copy of report.html with a script appended
that drives the page's own entry points (vdnGroups); its findings come back in the dumped DOM.
Exit 77 (skip) without chromium. usage: check_players.py REPORT_DIR"""
import json, os, re, shutil, subprocess, sys, tempfile

rep_dir = os.path.abspath(sys.argv[1])
chrome = shutil.which("chromium") or shutil.which("chromium-browser")
if not chrome:
    print("skip: chromium not installed")
    sys.exit(77)
page = open(os.path.join(rep_dir, "report.html")).read()
rep = json.load(open(os.path.join(rep_dir, "report.json")))
want = sorted(p for per in rep["videos"].values() for p in per.values())
srcs = sorted(re.findall(r'<video [^>]*src="([^"]+)"', page))
fails = []
if not want or srcs != want:
    fails.append(f"players' sources {srcs} != report.json's videos {want}")
for s in srcs:
    if not os.path.isfile(os.path.join(rep_dir, s)):
        fails.append(f"{s}: no such file beside the report")
probe = """<script>
(function(){
  var out = {groups: []}, pre = document.createElement('pre');
  pre.id = 'players-result'; document.body.appendChild(pre);
  function done(){ pre.textContent = JSON.stringify(out); }
  function ready(v){ return new Promise(function(res){
    if (v.readyState >= 1 || v.error) return res();
    v.addEventListener('loadedmetadata', res); v.addEventListener('error', res); }); }
  var g = vdnGroups[0];
  function sleep(ms){ return new Promise(function(res){ setTimeout(res, ms); }); }
  // One try: play from the start, put the last follower 0.3 s out of step, watch every 100 ms
  // until all play in step again or the baseline ends. The clip is 1.6 s, and on a loaded machine
  // Chromium's seeks can take longer than that, so an ended baseline starts over (3 tries).
  function attempt(n){
    out.attempts = n;
    return (n == 1 ? g.play() : g.restart()).then(function(){ return sleep(200); }).then(function(){
      var f = g.videos[g.videos.length - 1];
      f.currentTime = f.currentTime + 0.3;
      out.trace = [];
      return new Promise(function(res){
        var iv = setInterval(function(){
          var ts = g.videos.map(function(v){ return v.currentTime; });
          var spread = Math.max.apply(null, ts) - Math.min.apply(null, ts);
          out.trace.push(ts);
          var playing = g.videos.every(function(v){ return !v.paused && !v.seeking; });
          if ((playing && spread < 0.1 && out.trace.length > 3) || g.videos[0].ended ||
              out.trace.length > 40) { clearInterval(iv); res(); }
        }, 100);
      });
    }).then(function(){
      out.playing = g.videos.map(function(v){ return {t: v.currentTime, paused: v.paused}; });
      var ts = out.playing.map(function(p){ return p.t; });
      var ok = out.playing.every(function(p){ return !p.paused; }) &&
               Math.max.apply(null, ts) - Math.min.apply(null, ts) <= 0.1;
      if (!ok && n < 3) return attempt(n + 1);
    });
  }
  if (!g) { out.error = 'no player group'; return done(); }
  Promise.all(g.videos.map(ready)).then(function(){
    out.meta = g.videos.map(function(v){ return {src: v.getAttribute('src'), ready: v.readyState,
      error: v.error ? v.error.code : null, duration: v.duration}; });
    return attempt(1);
  }).then(function(){
    g.videos[0].pause();
    return new Promise(function(res){ setTimeout(res, 300); });
  }).then(function(){
    out.after_pause = g.videos.map(function(v){ return v.paused; });
    out.groups = vdnGroups.length; done();
  }).catch(function(e){ out.error = String(e); done(); });
})();
</script>"""
probe_path = os.path.join(rep_dir, "players_probe.html")
open(probe_path, "w").write(page.replace("</body>", probe + "</body>"))
prof = tempfile.mkdtemp(prefix="vdn-players-")
try:
    dom = subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update",
                          "--disable-sync", "--user-data-dir=" + prof,
                          "--autoplay-policy=no-user-gesture-required",
                          "--virtual-time-budget=30000", "--dump-dom", "file://" + probe_path],
                         capture_output=True, text=True, timeout=120).stdout
finally:
    shutil.rmtree(prof, ignore_errors=True)
m = re.search(r'<pre id="players-result">(.*?)</pre>', dom, re.S)
if not m or not m.group(1):
    fails.append("the probe wrote nothing: the page's script did not run")
    res = {}
else:
    res = json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
if res.get("error"):
    fails.append(f"probe: {res['error']}")
if res and not res.get("error"):
    if res["groups"] != len({os.path.dirname(s) for s in srcs}):
        fails.append(f"{res['groups']} player groups for the prompts of {srcs}")
    for mt in res["meta"]:
        if mt["ready"] < 1 or mt["error"] is not None or not mt["duration"] > 0:
            fails.append(f"player {mt}: not loaded")
    ts = [p["t"] for p in res["playing"]]
    if any(p["paused"] for p in res["playing"]) or min(ts) < 0.3 or max(ts) - min(ts) > 0.1:
        fails.append(f"synced playback after {res['attempts']} tries: {res['playing']}; "
                     f"clocks every 100 ms: {res['trace']}")
    if not all(res["after_pause"]):
        fails.append(f"pausing the baseline left players running: {res['after_pause']}")
if fails:
    print("FAIL\n" + "\n".join(fails))
    sys.exit(1)
print(f"ok: {len(srcs)} players with sources; in step again {len(res['trace']) * 100} ms after "
      f"the offset (try {res['attempts']}): {res['playing']}")
