// The partmap console. It speaks only the public HTTP API, as curl and the
// Go client do, so it can do nothing that they cannot. No framework and no
// build step: the server embeds this file as it is.
'use strict';

// Relative to the page, so that a proxy that mounts the server under a
// prefix still works. Keep in step with BasePath in http/http.go.
const API = 'patterns/hash-partitioned-attribute-map';
const PROBLEM = 'urn:partmap:problem:';
// The heatmap draws at most this many cells (40 columns of 25); beyond it,
// each cell holds a run of partitions. /partitions says how many there are.
const MAX_CELLS = 1000;
const TOKEN_KEY = 'partmap.token';
const DOCUMENTED = ['fullName', 'companyName', 'customerTier'];

const $ = (id) => document.getElementById(id);

// ApiError is a failed request, carrying the server's problem document.
class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || 'HTTP ' + status);
    this.status = status;
    this.problem = problem;
    const type = typeof problem.type === 'string' ? problem.type : '';
    this.code = type.startsWith(PROBLEM) ? type.slice(PROBLEM.length) : '';
  }
}

// A mistake found before anything is sent.
class FormError extends Error {}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

// api sends one request and returns {status, etag, data}, or throws an
// ApiError whose problem is the server's, or one made up for a failure that
// never reached partmap (the network, a proxy's HTML page).
async function api(method, path, { query = {}, body, headers = {} } = {}) {
  const url = new URL(API + path, document.baseURI);
  for (const [k, v] of Object.entries(query)) {
    if (Array.isArray(v)) v.forEach((each) => url.searchParams.append(k, each));
    else if (v !== undefined && v !== null) url.searchParams.set(k, v);
  }
  const h = new Headers(headers);
  if (token()) h.set('Authorization', 'Bearer ' + token());
  const init = { method, headers: h, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    h.set('Content-Type', 'application/json');
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (err) {
    throw new ApiError(0, { title: 'Network error', detail: 'the server could not be reached (' + err.message + ')' });
  }
  const text = res.status === 204 ? '' : await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const problem = data && typeof data === 'object' ? data : { title: res.statusText, detail: text.slice(0, 200) };
    throw new ApiError(res.status, problem);
  }
  return { status: res.status, etag: res.headers.get('ETag'), data };
}

// ---- Notices ------------------------------------------------------------

// notify shows one message at the top. kind is ok, info, warn, error or
// auth; code is the problem's code, if any; action is an optional button.
function notify(kind, text, { code = '', action = null } = {}) {
  const n = $('notice');
  n.dataset.kind = kind;
  n.dataset.problem = code;
  $('notice-text').textContent = text;
  const b = $('notice-action');
  if (action) {
    b.textContent = action.label;
    b.onclick = () => {
      n.hidden = true;
      action.run();
    };
    b.hidden = false;
  } else {
    b.onclick = null;
    b.hidden = true;
  }
  n.hidden = false;
}

function detailOf(err) {
  return err.problem.detail || err.problem.title || 'HTTP ' + err.status;
}

// report explains a failure. what says what was being done, as in "Could
// not save". Every problem's detail is shown: it is written for people.
function report(err, what) {
  if (err instanceof FormError) {
    notify('error', err.message);
    return;
  }
  if (!(err instanceof ApiError)) {
    console.error(err);
    notify('error', what + ': ' + err.message);
    return;
  }
  const detail = detailOf(err);
  if (err.status === 401) {
    askForToken();
    const text = token()
      ? 'The server did not accept your token (' + detail + '). Enter a valid one in the Bearer token field above.'
      : 'This server needs a bearer token. Paste one into the Bearer token field above and press Use token (' + detail + ').';
    notify('auth', text, { code: err.code || 'unauthorized' });
  } else if (err.status === 403) {
    askForToken();
    notify('auth', what + ': your token may not do this (' + detail + '). Use a token with a wider scope.', { code: err.code || 'forbidden' });
  } else if (err.code === 'not-started') {
    notify('warn', 'The directory has not been started yet: ' + detail + '.', {
      code: err.code,
      action: { label: 'Start the directory', run: startDirectory },
    });
  } else {
    notify('error', what + ': ' + detail, { code: err.code });
  }
}

function askForToken() {
  $('token-form').classList.add('attention');
  $('token').focus();
}

// ---- Token ----------------------------------------------------------------

function useToken(ev) {
  ev.preventDefault();
  const t = $('token').value.trim();
  if (t) {
    sessionStorage.setItem(TOKEN_KEY, t);
    notify('ok', 'Token kept for this browser tab; every request sends it.');
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
    notify('info', 'No token: requests are sent without one.');
  }
  $('token-form').classList.remove('attention');
  refreshData();
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $('token').value = '';
  notify('info', 'Token forgotten; requests are sent without one.');
  refreshData();
}

async function startDirectory() {
  try {
    const r = await api('POST', '/start');
    notify('ok', r.data && r.data.alreadyStarted ? 'The directory was already started.' : 'The directory is started.');
    refreshData();
  } catch (err) {
    report(err, 'Could not start the directory');
  }
}

// ---- Partitions -----------------------------------------------------------

// partitionOf places a canonical email as partmap.PartitionOf does: 32-bit
// FNV-1a over its bytes (ASCII, so one per character), modulo the count.
function partitionOf(canonical, n) {
  let h = 0x811c9dc5;
  for (let i = 0; i < canonical.length; i++) {
    h ^= canonical.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % n;
}

// partitionName names a partition as partmap does: at least three digits.
function partitionName(n) {
  return 'partition-' + String(n).padStart(3, '0');
}

function partitionNumber(name) {
  const m = /^partition-(\d{3,})$/.exec(String(name));
  return m ? Number(m[1]) : -1;
}

// The heatmap is drawn for the directory's partition count, as the last
// GET /partitions said (0 until one has answered). An online resize changes
// it, so every load reads it again and redraws what depends on it. cells[i]
// holds partitions i*perCell to i*perCell+perCell-1 (the last may hold
// fewer), so that any count up to partmap.MaxPartitions draws as at most
// MAX_CELLS cells.
const heat = { partitions: 0, perCell: 1, cells: [] };

// partitionOfEmail names the partition of a profile's email, or says that
// the count is not known yet.
function partitionOfEmail(email) {
  return heat.partitions ? partitionName(partitionOf(email, heat.partitions)) : 'partition unknown';
}

let selectedCell = -1;
let currentCell = -1;
let heatmapSeq = 0;

function number(n) {
  return n.toLocaleString('en');
}

function cellLabel(first, last) {
  return first === last ? partitionName(first) : partitionName(first) + ' to ' + partitionName(last);
}

// buildHeatmap makes the cells for n partitions.
function buildHeatmap(n) {
  const perCell = Math.max(1, Math.ceil(n / MAX_CELLS));
  const cells = [];
  for (let first = 0; first < n; first += perCell) {
    const last = Math.min(n, first + perCell) - 1;
    const c = document.createElement('div');
    c.className = 'cell empty';
    c.dataset.partition = cellLabel(first, last);
    c.dataset.first = String(first);
    c.dataset.last = String(last);
    c.dataset.profiles = '0';
    c.dataset.index = String(cells.length);
    c.title = c.dataset.partition + ': not loaded';
    cells.push(c);
  }
  Object.assign(heat, { partitions: n, perCell, cells });
  selectedCell = -1;
  currentCell = -1;
  $('heatmap').replaceChildren(...cells);
  $('heatmap').setAttribute('aria-label', number(n) + ' partitions' +
    (perCell > 1 ? ', ' + number(perCell) + ' to a cell,' : '') +
    ' coloured by profile count; arrow keys move, the detail line below names the selected cell');
  $('heatmap-detail').textContent = 'Click a cell to see its partition' + (perCell > 1 ? 's.' : '.');
}

function cellOf(partition) {
  return Math.floor(partition / heat.perCell);
}

function wireHeatmap() {
  const grid = $('heatmap');
  grid.addEventListener('click', (ev) => {
    const c = ev.target.closest('.cell');
    if (c) selectCell(Number(c.dataset.index));
  });
  grid.addEventListener('keydown', (ev) => {
    const cols = 40;
    const step = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -cols, ArrowDown: cols }[ev.key];
    if (step === undefined || heat.cells.length === 0) return;
    ev.preventDefault();
    const from = selectedCell < 0 ? 0 : selectedCell;
    selectCell(Math.min(heat.cells.length - 1, Math.max(0, from + step)));
  });
}

function profilesText(n) {
  return n === 1 ? '1 profile' : number(n) + ' profiles';
}

function selectCell(i) {
  if (selectedCell >= 0) heat.cells[selectedCell].classList.remove('selected');
  selectedCell = i;
  const c = heat.cells[i];
  c.classList.add('selected');
  $('heatmap-detail').textContent = c.dataset.partition + ': ' + profilesText(Number(c.dataset.profiles));
}

// markCurrent marks the cell of the profile on screen, if any.
function markCurrent() {
  if (currentCell >= 0) heat.cells[currentCell].classList.remove('current');
  currentCell = current.profile && heat.partitions ? cellOf(partitionOf(current.profile.emailAddress, heat.partitions)) : -1;
  if (currentCell >= 0) heat.cells[currentCell].classList.add('current');
}

// showPartitions writes the partition of every profile on the page, with
// the count the heatmap was last drawn for.
function showPartitions() {
  if (current.profile) $('view-partition').textContent = partitionOfEmail(current.profile.emailAddress);
  for (const td of $('browse-rows').querySelectorAll('td.partition')) {
    td.textContent = partitionOfEmail(td.parentElement.dataset.email);
  }
  markCurrent();
}

// colour spreads counts on a log scale, so that a few full partitions do not
// wash out the rest.
function colour(n, max) {
  const t = max <= 1 ? 1 : Math.log1p(n) / Math.log1p(max);
  return 'hsl(212 72% ' + (84 - 54 * t).toFixed(1) + '%)';
}

async function loadHeatmap() {
  const seq = ++heatmapSeq;
  let r;
  try {
    r = await api('GET', '/partitions');
  } catch (err) {
    if (seq === heatmapSeq) report(err, 'Could not load the partitions');
    return;
  }
  if (seq !== heatmapSeq) return; // a later refresh is on its way
  const n = r.data.totalPartitions;
  if (n !== heat.partitions) buildHeatmap(n);
  const counts = new Array(heat.cells.length).fill(0);
  let fullest = 0;
  let outside = 0;
  for (const p of r.data.partitions) {
    const i = partitionNumber(p.name);
    if (i < 0 || i >= n) {
      outside++;
      continue;
    }
    counts[cellOf(i)] += p.profiles;
    fullest = Math.max(fullest, p.profiles);
  }
  const max = Math.max(1, ...counts);
  counts.forEach((k, i) => {
    const c = heat.cells[i];
    c.dataset.profiles = String(k);
    c.classList.toggle('empty', k === 0);
    c.style.backgroundColor = k === 0 ? '' : colour(k, max);
    c.title = c.dataset.partition + ': ' + profilesText(k);
  });
  $('legend-max').textContent = number(max);
  let summary = profilesText(r.data.totalProfiles) + ' in ' + number(r.data.partitionsInUse) + ' of ' + number(n) +
    ' partitions; the fullest holds ' + number(fullest) + '.';
  if (heat.perCell > 1) summary += ' A cell holds ' + number(heat.perCell) + ' partitions.';
  if (outside) summary += ' ' + outside + ' partitions beyond ' + partitionName(n - 1) + ' are not drawn.';
  $('heatmap-summary').textContent = summary;
  $('heatmap').dataset.loaded = String(seq);
  showPartitions();
  if (selectedCell >= 0) selectCell(selectedCell);
}

// ---- One profile ----------------------------------------------------------

const current = { profile: null, etag: '', mode: 'none' }; // mode: none, view, edit, create

function setMode(mode) {
  current.mode = mode;
  $('profile-view').hidden = mode !== 'view';
  $('editor').hidden = mode !== 'edit' && mode !== 'create';
  $('delete-confirm').hidden = true;
  $('rename-form').hidden = true;
  if (mode !== 'view') clearInterval(deadlines.timer);
  if (mode === 'none') {
    current.profile = null;
    current.etag = '';
    markCurrent();
  }
}

async function findProfile(email) {
  loadHeatmap(); // the partition count too may have changed since
  try {
    const r = await api('GET', '/customer-profile', { query: { emailAddress: email } });
    showProfile(r.data, r.etag);
  } catch (err) {
    setMode('none');
    report(err, 'Lookup failed');
  }
}

function showProfile(profile, etag) {
  current.profile = profile;
  current.etag = etag || '';
  const email = profile.emailAddress;
  $('view-email').textContent = email;
  $('view-etag').textContent = current.etag;
  const dl = $('view-fields');
  dl.replaceChildren();
  for (const [name, value] of Object.entries(profile)) {
    if (name === 'emailAddress') continue;
    const dt = document.createElement('dt');
    dt.textContent = name;
    const dd = document.createElement('dd');
    dd.dataset.field = name;
    dd.textContent = value;
    if (value === '') dd.classList.add('blank');
    dl.append(dt, dd);
  }
  if (dl.children.length === 0) {
    const dd = document.createElement('dd');
    dd.className = 'blank';
    dd.textContent = 'No fields but the email address.';
    dl.append(dd);
  }
  showPartitions();
  setMode('view');
  loadDeadlines(email, Object.keys(profile).filter((n) => n !== 'emailAddress'));
}

// ---- Deadlines ------------------------------------------------------------

// The deadlines shown count down against the server's clock: skew is the
// server's now minus this browser's, from the reply that gave them.
const deadlines = { skew: 0, timer: 0, email: '', refetched: false, goneAt: 0 };

// loadDeadlines asks when the profile and its fields expire, and puts a
// countdown beside each that does.
async function loadDeadlines(email, names) {
  let r;
  try {
    r = await api('GET', '/customer-profile/ttl', { query: { emailAddress: email, field: names } });
  } catch (err) {
    if (err.code !== 'not-found') report(err, 'Reading deadlines failed');
    return;
  }
  if (!current.profile || current.profile.emailAddress !== email) return; // another profile since
  deadlines.skew = r.data.now - Date.now();
  deadlines.email = email;
  deadlines.refetched = false;
  const p = $('view-ttl');
  p.replaceChildren();
  p.hidden = r.data.profile.deadline === undefined;
  if (!p.hidden) p.append('Profile expires ', countdown(r.data.profile.deadline));
  let gone = false;
  for (const f of r.data.fields) {
    const dd = $('view-fields').querySelector(`dd[data-field="${CSS.escape(f.field)}"]`);
    // -2: the field shown has expired between the profile's read and
    // this one, and no countdown would ever run out to remove it.
    gone = gone || (dd !== null && f.code === -2);
    if (dd && f.deadline !== undefined) dd.append(' ', countdown(f.deadline));
  }
  tick();
  // Once a second at most, should the two reads keep disagreeing.
  if (gone && Date.now() - deadlines.goneAt > 1000) {
    deadlines.goneAt = Date.now();
    findProfile(email);
  }
  clearInterval(deadlines.timer);
  deadlines.timer = setInterval(tick, 1000);
}

function countdown(deadline) {
  const span = document.createElement('span');
  span.className = 'ttl';
  span.dataset.deadline = deadline;
  span.title = 'expires at ' + new Date(deadline).toISOString();
  return span;
}

// tick redraws every countdown; once one has run out, what it counted
// down to is gone, so the profile is read again, once.
function tick() {
  const now = Date.now() + deadlines.skew;
  let due = false;
  for (const span of document.querySelectorAll('#profile-view .ttl')) {
    const left = Number(span.dataset.deadline) - now;
    span.textContent = left > 0 ? 'in ' + duration(left) : 'now';
    due = due || left <= 0;
  }
  if (due && !deadlines.refetched && current.profile && current.profile.emailAddress === deadlines.email) {
    deadlines.refetched = true;
    findProfile(deadlines.email);
  }
}

// duration says how long ms is, in its two largest units.
function duration(ms) {
  const s = Math.ceil(ms / 1000);
  const units = [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]];
  const parts = [];
  let rest = s;
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    if (n > 0 || (parts.length === 0 && size === 1)) parts.push(n + name);
    rest -= n * size;
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

// addFieldRow adds a row for a field that is not documented. A row made
// from the profile is that field until its remove button drops the row;
// a row added and left blank is no field.
function addFieldRow(name = '', value = '', loaded = false) {
  const row = document.createElement('div');
  row.className = 'field-row';
  if (loaded) row.dataset.loaded = name;
  const input = (className, placeholder, label, text) => {
    const i = document.createElement('input');
    i.type = 'text';
    i.className = className;
    i.placeholder = placeholder;
    i.setAttribute('aria-label', label);
    i.value = text;
    return i;
  };
  const n = input('field-name', 'name', 'Field name', name);
  n.spellcheck = false;
  const v = input('field-value', 'empty', 'Value of the field', value);
  const del = document.createElement('button');
  del.type = 'button';
  del.className = 'quiet';
  del.textContent = '\u00d7';
  del.setAttribute('aria-label', 'Remove the field');
  del.addEventListener('click', () => row.remove());
  row.append(n, v, del);
  $('extra-fields').append(row);
  return n;
}

// A documented field's box is present (its value, "" included, is saved)
// or absent (not set, and not saved). Empty is not missing: only its remove
// button makes a field absent, and typing in an absent box sets it.
function setPresent(field, present) {
  const box = $('edit-' + field);
  box.dataset.present = String(present);
  box.placeholder = present ? 'empty' : 'not set';
  $('remove-' + field).disabled = !present;
}

function openEditor(mode) {
  const p = mode === 'edit' ? current.profile : {};
  $('editor-title').textContent = mode === 'edit' ? 'Edit ' + p.emailAddress : 'New profile';
  const email = $('edit-emailAddress');
  email.value = p.emailAddress || '';
  email.readOnly = mode === 'edit'; // the email is the key: another email is another profile
  for (const f of DOCUMENTED) {
    $('edit-' + f).value = p[f] ?? '';
    setPresent(f, Object.hasOwn(p, f));
  }
  $('extra-fields').replaceChildren();
  for (const [name, value] of Object.entries(p)) {
    if (name !== 'emailAddress' && !DOCUMENTED.includes(name)) addFieldRow(name, value, true);
  }
  setMode(mode);
  (mode === 'edit' ? $('edit-fullName') : email).focus();
}

// collectProfile reads the editor into the JSON profile a PUT sends: every
// field that is present, empty or not. The PUT replaces the whole profile,
// so a field left out is deleted; only a remove button leaves one out.
function collectProfile() {
  const profile = { emailAddress: $('edit-emailAddress').value };
  for (const f of DOCUMENTED) {
    const box = $('edit-' + f);
    if (box.dataset.present === 'true') profile[f] = box.value;
  }
  for (const row of $('extra-fields').querySelectorAll('.field-row')) {
    const name = row.querySelector('.field-name').value;
    const value = row.querySelector('.field-value').value;
    if (name === '' && value === '' && row.dataset.loaded === undefined) continue;
    if (name === '' && value === '') {
      throw new FormError('The field ' + row.dataset.loaded + ' has lost its name. Type it again, or remove the field with \u00d7.');
    }
    if (name === '') throw new FormError('A field with the value "' + value + '" has no name.');
    if (name === 'emailAddress' || DOCUMENTED.includes(name)) {
      throw new FormError('Set ' + name + ' in its own box above, not as another field.');
    }
    if (Object.hasOwn(profile, name)) throw new FormError('The field ' + name + ' is given twice.');
    profile[name] = value;
  }
  return profile;
}

async function saveProfile(ev) {
  ev.preventDefault();
  const creating = current.mode === 'create';
  let profile;
  try {
    profile = collectProfile();
  } catch (err) {
    report(err, 'Not saved');
    return;
  }
  // A new profile must not silently replace an existing one, and an edit
  // must not overwrite a change made since it was loaded.
  const headers = creating ? { 'If-None-Match': '*' } : { 'If-Match': current.etag };
  const save = $('save-button');
  save.disabled = true;
  try {
    const r = await api('PUT', '/customer-profile', { body: profile, headers });
    showProfile(r.data, r.etag);
    notify('ok', (r.status === 201 ? 'Created ' : 'Saved ') + r.data.emailAddress + '.');
    refreshData();
  } catch (err) {
    if (err.code === 'precondition-failed' && creating) {
      const email = profile.emailAddress;
      notify('warn', 'Not created: a profile for ' + email.trim() + ' already exists, and New profile never replaces one (' + detailOf(err) + ').', {
        code: err.code,
        action: { label: 'Open it', run: () => findProfile(email) },
      });
    } else if (err.code === 'precondition-failed') {
      conflict(err, 'Not saved');
    } else {
      report(err, creating ? 'Not created' : 'Not saved');
    }
  } finally {
    save.disabled = false;
  }
}

// conflict explains a 412 on a profile the user had loaded.
function conflict(err, what) {
  const email = current.profile.emailAddress;
  notify('warn', what + ': ' + email + ' was changed or deleted since you loaded it, so your change could undo someone else\'s (' +
    detailOf(err) + '). Reload it to see the current version, then try again.', {
    code: err.code,
    action: { label: 'Reload ' + email, run: () => findProfile(email) },
  });
}

async function deleteProfile() {
  const email = current.profile.emailAddress;
  $('delete-confirm').hidden = true;
  try {
    await api('DELETE', '/customer-profile', { query: { emailAddress: email }, headers: { 'If-Match': current.etag } });
    setMode('none');
    notify('ok', 'Deleted ' + email + '.');
    refreshData();
  } catch (err) {
    if (err.code === 'precondition-failed') conflict(err, 'Not deleted');
    else report(err, 'Not deleted');
  }
}

// renameProfile moves the profile in view to another email, in one atomic
// step on the server, and only if nobody changed it since it was loaded.
async function renameProfile(ev) {
  ev.preventDefault();
  const from = current.profile.emailAddress;
  const to = $('rename-to').value;
  $('rename-yes').disabled = true;
  try {
    const r = await api('POST', '/customer-profile/rename', { query: { emailAddress: from, to }, headers: { 'If-Match': current.etag } });
    showProfile(r.data, r.etag);
    notify('ok', 'Moved ' + from + ' to ' + r.data.emailAddress + '.');
    refreshData();
  } catch (err) {
    if (err.code === 'precondition-failed') {
      conflict(err, 'Not moved');
    } else if (err.code === 'exists') {
      notify('warn', 'Not moved: ' + to.trim() + ' already has a profile (' + detailOf(err) + ').', {
        code: err.code,
        action: { label: 'Open it', run: () => findProfile(to) },
      });
    } else {
      report(err, 'Not moved');
    }
  } finally {
    $('rename-yes').disabled = false;
  }
}

// ---- Browsing -------------------------------------------------------------

// cursors[i] is the cursor of page i; page 0 has none.
const browse = { cursors: [''], page: 0, next: null };
let browseSeq = 0;

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text ?? '';
  if (className) td.className = className;
  return td;
}

// profileRow is a table row of a profile: its email opens it, and the
// fields that have no column are named in the last.
function profileRow(p, withPartition) {
  const tr = document.createElement('tr');
  tr.dataset.email = p.emailAddress;
  const open = document.createElement('button');
  open.type = 'button';
  open.className = 'link';
  open.textContent = p.emailAddress;
  open.addEventListener('click', () => findProfile(p.emailAddress));
  const first = document.createElement('td');
  first.append(open);
  const others = Object.keys(p).filter((k) => k !== 'emailAddress' && !DOCUMENTED.includes(k));
  tr.append(first, cell(p.fullName), cell(p.companyName), cell(p.customerTier));
  if (withPartition) tr.append(cell(partitionOfEmail(p.emailAddress), 'mono partition'));
  tr.append(cell(others.join(', '), 'others'));
  tr.lastChild.title = others.join(', ');
  return tr;
}

async function loadPage() {
  const seq = ++browseSeq;
  const limit = $('page-size').value;
  const cursor = browse.cursors[browse.page] || undefined;
  let r;
  try {
    r = await api('GET', '/customer-profiles', { query: { limit, cursor } });
  } catch (err) {
    if (seq === browseSeq) report(err, 'Could not list the profiles');
    return;
  }
  if (seq !== browseSeq) return;
  const rows = r.data.profiles.map((p) => profileRow(p, true));
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = cell(browse.page === 0 ? 'No profiles yet.' : 'No profiles on this page.', 'blank');
    td.colSpan = 6;
    tr.append(td);
    rows.push(tr);
  }
  $('browse-rows').replaceChildren(...rows);
  browse.next = r.data.nextCursor;
  $('browse-prev').disabled = browse.page === 0;
  $('browse-first').disabled = browse.page === 0;
  $('browse-next').disabled = !browse.next;
  const from = browse.page * Number(limit);
  $('browse-page').textContent = 'Page ' + (browse.page + 1) +
    (r.data.profiles.length ? ' \u00b7 ' + (from + 1) + '\u2013' + (from + r.data.profiles.length) : '');
  $('browse-table').dataset.page = String(browse.page + 1);
}

function firstPage() {
  browse.cursors = [''];
  browse.page = 0;
  loadPage();
}

function nextPage() {
  if (!browse.next) return;
  browse.cursors[browse.page + 1] = browse.next;
  browse.cursors.length = browse.page + 2;
  browse.page++;
  loadPage();
}

function prevPage() {
  if (browse.page === 0) return;
  browse.page--;
  loadPage();
}

// ---- Search ---------------------------------------------------------------

const SEARCH_PAGE = 25;
// The search on screen: the index and the query sent, and cursors[i], the
// cursor of page i (page 0 has none).
const finder = { indexes: [], index: '', sent: '', cursors: [''], page: 0, next: null, timer: 0 };
let searchSeq = 0;
let indexesSeq = 0;

// loadIndexes fills the index picker from GET /indexes, keeping the
// choice; else it picks the first index that is not the directory's own
// equality index, whose TAG fields plain words cannot search.
async function loadIndexes() {
  const seq = ++indexesSeq;
  let r;
  try {
    r = await api('GET', '/indexes');
  } catch (err) {
    if (seq === indexesSeq) report(err, 'Could not list the search indexes');
    return;
  }
  if (seq !== indexesSeq) return;
  finder.indexes = r.data.indexes;
  const select = $('search-index');
  const kept = select.value;
  const options = finder.indexes.map((x) => {
    const o = document.createElement('option');
    o.value = x.name;
    o.textContent = x.name + (x.building ? ' (building)' : '');
    return o;
  });
  select.replaceChildren(...options);
  select.disabled = options.length === 0;
  const names = finder.indexes.map((x) => x.name);
  const mine = finder.indexes.find((x) => !x.legacy);
  select.value = names.includes(kept) ? kept : mine ? mine.name : names[0] || '';
  showIndexInfo();
  $('search-panel').dataset.indexes = String(seq);
}

function showIndexInfo() {
  const x = finder.indexes.find((i) => i.name === $('search-index').value);
  const info = $('search-index-info');
  if (!x) {
    info.textContent = 'No search index yet. Create one with `partmap index create NAME FIELD:TYPE...` or POST /indexes.';
    return;
  }
  const fields = x.fields.map((f) => f.name + ' ' + f.type + (f.sortable ? ' sortable' : '')).join(' \u00b7 ');
  info.textContent = x.building
    ? fields + ' \u2014 building: ' + Math.floor(x.progress * 100) + '% of partitions indexed; it answers searches once built.'
    : fields + ' \u2014 ' + profilesText(x.numDocs) + ' indexed.';
}

// queryToSend turns what was typed into the query sent. A query of plain
// words (letters and digits) searches for words that begin with them, as
// a support desk's box does: "ali" is sent as "ali*". Anything in the
// query syntax is sent as typed.
function queryToSend(typed) {
  const q = typed.trim();
  const words = q.split(/\s+/).filter(Boolean);
  if (!$('search-prefix').checked || words.length === 0 || !words.every((w) => /^[\p{L}\p{N}]+$/u.test(w))) return q;
  // A prefix needs two characters; a single letter stays a word.
  return words.map((w) => ([...w].length >= 2 ? w + '*' : w)).join(' ');
}

function startSearch() {
  clearTimeout(finder.timer);
  finder.index = $('search-index').value;
  finder.sent = queryToSend($('search-query').value);
  finder.cursors = [''];
  finder.page = 0;
  if (!finder.index) {
    showSearchError('error', '', 'There is no search index to search. Create one with `partmap index create` or POST /indexes, then press Reload indexes.');
    return;
  }
  if (finder.sent === '') {
    clearSearch();
    return;
  }
  runSearch();
}

// searchAsYouType searches a moment after the typing stops, once there
// are two characters: one letter is no prefix.
function searchAsYouType() {
  clearTimeout(finder.timer);
  if ($('search-query').value.trim().length < 2) return;
  finder.timer = setTimeout(startSearch, 250);
}

function clearSearch() {
  ++searchSeq;
  $('search-error').hidden = true;
  $('search-table').hidden = true;
  $('search-paging').hidden = true;
  $('search-rows').replaceChildren();
}

async function runSearch() {
  const seq = ++searchSeq;
  const { index, sent } = finder;
  const cursor = finder.cursors[finder.page] || undefined;
  let r;
  try {
    r = await api('GET', '/indexes/' + encodeURIComponent(index) + '/search', { query: { query: sent, limit: SEARCH_PAGE, cursor } });
  } catch (err) {
    if (seq === searchSeq) searchFailed(err, index, sent);
    return;
  }
  if (seq !== searchSeq) return;
  $('search-error').hidden = true;
  // An index listed as building that answers is built now: list it so.
  if (finder.indexes.some((x) => x.name === index && x.building)) loadIndexes();
  const rows = r.data.hits.map((h) => profileRow(h.fields || { emailAddress: h.emailAddress }, false));
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = cell(finder.page === 0 ? 'No profile matches.' : 'No more profiles match.', 'blank');
    td.colSpan = 5;
    tr.append(td);
    rows.push(tr);
  }
  $('search-rows').replaceChildren(...rows);
  finder.next = r.data.nextCursor;
  const total = r.data.total;
  $('search-summary').textContent = (total === 1 ? '1 profile matches ' : number(total) + ' profiles match ') + sent;
  const from = finder.page * SEARCH_PAGE;
  $('search-page').textContent = 'Page ' + (finder.page + 1) +
    (r.data.hits.length ? ' \u00b7 ' + (from + 1) + '\u2013' + (from + r.data.hits.length) : '');
  $('search-prev').disabled = finder.page === 0;
  $('search-first').disabled = finder.page === 0;
  $('search-next').disabled = !finder.next;
  const table = $('search-table');
  table.dataset.page = String(finder.page + 1);
  table.dataset.total = String(total);
  table.dataset.query = sent;
  table.hidden = false;
  $('search-paging').hidden = false;
}

// searchFailed explains a refused search beside the box: a bad query with
// the server's words and a mark under where it went wrong, an index still
// building or gone; anything else goes to the notice line.
function searchFailed(err, index, sent) {
  if (!(err instanceof ApiError) || ![400, 404, 503].includes(err.status)) {
    clearSearch();
    report(err, 'Search failed');
    return;
  }
  clearSearch();
  const detail = detailOf(err);
  if (err.code === 'unavailable') {
    showSearchError('building', err.code, 'The index ' + index + ' cannot answer yet: ' + detail + '. Search again in a moment.');
    loadIndexes();
  } else if (err.code === 'not-found') {
    showSearchError('error', err.code, 'There is no index ' + index + ' any more (' + detail + '); the list of indexes is reloaded.');
    loadIndexes();
  } else {
    showSearchError('error', err.code, 'The query was refused: ' + detail, sent, offsetIn(detail, sent));
  }
}

// offsetIn reads where the server says a query went wrong ("at offset 4",
// in bytes of UTF-8) as an index into the query's characters, or -1.
function offsetIn(detail, query) {
  const m = /at offset (\d+)/.exec(detail);
  if (!m) return -1;
  const want = Number(m[1]);
  let bytes = 0;
  let i = 0;
  for (const ch of query) {
    if (bytes >= want) return i;
    bytes += new TextEncoder().encode(ch).length;
    i++;
  }
  return i;
}

function showSearchError(kind, code, text, query = '', at = -1) {
  const box = $('search-error');
  box.dataset.kind = kind;
  box.dataset.problem = code;
  $('search-error-text').textContent = text;
  const where = $('search-error-where');
  where.hidden = at < 0;
  where.textContent = at < 0 ? '' : query + '\n' + ' '.repeat(at) + '^';
  box.hidden = false;
}

function searchPage(step) {
  if (step > 0) {
    if (!finder.next) return;
    finder.cursors[finder.page + 1] = finder.next;
    finder.cursors.length = finder.page + 2;
    finder.page++;
  } else if (step < 0) {
    if (finder.page === 0) return;
    finder.page--;
  } else {
    finder.page = 0;
  }
  runSearch();
}

// ---- Wiring ---------------------------------------------------------------

function refreshData() {
  loadHeatmap();
  loadPage();
  loadIndexes();
  if (finder.sent && finder.index) runSearch(); // the same page, as the profiles are now
}

function init() {
  $('token').value = token();
  $('token-form').addEventListener('submit', useToken);
  $('token-forget').addEventListener('click', forgetToken);
  $('notice-close').addEventListener('click', () => { $('notice').hidden = true; });
  $('find-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    findProfile($('find-email').value);
  });
  $('new-button').addEventListener('click', () => openEditor('create'));
  $('edit-button').addEventListener('click', () => openEditor('edit'));
  $('delete-button').addEventListener('click', () => {
    $('delete-confirm').hidden = false;
    $('delete-no').focus();
  });
  $('delete-yes').addEventListener('click', deleteProfile);
  $('rename-button').addEventListener('click', () => {
    $('delete-confirm').hidden = true;
    $('rename-form').hidden = false;
    $('rename-to').value = current.profile.emailAddress;
    $('rename-to').select();
  });
  $('rename-form').addEventListener('submit', renameProfile);
  $('rename-no').addEventListener('click', () => { $('rename-form').hidden = true; });
  $('delete-no').addEventListener('click', () => { $('delete-confirm').hidden = true; });
  $('editor').addEventListener('submit', saveProfile);
  $('add-field').addEventListener('click', () => addFieldRow().focus());
  for (const f of DOCUMENTED) {
    $('edit-' + f).addEventListener('input', () => setPresent(f, true));
    $('remove-' + f).addEventListener('click', () => {
      $('edit-' + f).value = '';
      setPresent(f, false);
      $('edit-' + f).focus();
    });
  }
  $('cancel-edit').addEventListener('click', () => setMode(current.profile ? 'view' : 'none'));
  $('heatmap-refresh').addEventListener('click', loadHeatmap);
  $('page-size').addEventListener('change', firstPage);
  $('browse-first').addEventListener('click', firstPage);
  $('browse-prev').addEventListener('click', prevPage);
  $('browse-next').addEventListener('click', nextPage);
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    startSearch();
  });
  $('search-query').addEventListener('input', searchAsYouType);
  $('search-index').addEventListener('change', () => {
    showIndexInfo();
    if ($('search-query').value.trim()) startSearch();
  });
  $('search-prefix').addEventListener('change', () => {
    if ($('search-query').value.trim()) startSearch();
  });
  $('search-reload').addEventListener('click', loadIndexes);
  $('search-first').addEventListener('click', () => searchPage(0));
  $('search-prev').addEventListener('click', () => searchPage(-1));
  $('search-next').addEventListener('click', () => searchPage(1));
  wireHeatmap();
  refreshData();
}

init();
