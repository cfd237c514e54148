import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  applyOp,
  compactText,
  createText,
  defineMachine,
  deleteArgs,
  findNonJson,
  HerculesError,
  insertArgs,
  isTextPlace,
  keyedMap,
  textAt,
  textOps,
  textPlaceAt,
  textPlaceIndex,
  textRunLeft,
  textRunSize,
  textRunText,
  textToString,
  type OpInvocation,
  type Text,
  type TextBranch,
} from '../src/index.ts';
import { decode, encode } from '../src/msgpack.ts';
import { Loopback } from './harness.ts';

const machine = defineMachine({
  name: 'text-test',
  version: 1,
  initial: { doc: createText('hello'), notes: keyedMap.from({ a: createText() }) },
  ops: { ...textOps() },
});
type S = typeof machine.initial;

/** A branch's counts are its kids' sums, it holds 1 to 32 kids, and every leaf is at one depth (TEXT-LAYOUT); returns that depth. */
function checkBranch(b: TextBranch): number {
  assert.ok(b.kids.length >= 1 && b.kids.length <= 32, `a branch of ${b.kids.length} kids`);
  assert.equal(
    b.v,
    b.kids.reduce((n, k) => n + k.v, 0),
    'a branch visible count',
  );
  assert.equal(
    b.f,
    b.kids.reduce((n, k) => n + k.f, 0),
    'a branch total count',
  );
  const depths = new Set(b.kids.map((k) => ('runs' in k ? 0 : checkBranch(k))));
  assert.equal(depths.size, 1, 'leaves at different depths');
  return [...depths][0] + 1;
}

/** Check the tree's and chunks' counts and that every id is held once; returns the visible text. */
function checkShape(t: Text): string {
  const ids = new Set<string>();
  let len = 0;
  assert.equal(t.$text, 3, 'the layout');
  checkBranch(t.root);
  for (const ch of compactText(t).chunks) {
    let v = 0;
    let f = 0;
    for (const r of ch.runs) {
      const n = textRunSize(r);
      assert.ok(n > 0, 'an empty run');
      for (let i = 0; i < n; i++) {
        const id = `${r[0]}:${r[1] + i}`;
        assert.ok(!ids.has(id), `id ${id} is held twice`);
        ids.add(id);
      }
      f += n;
      if (textRunText(r) !== undefined) v += n;
    }
    assert.equal(ch.v, v, 'a chunk visible count');
    assert.equal(ch.f, f, 'a chunk total count');
    assert.ok(ch.runs.length <= 64, 'a chunk past 64 runs');
    len += v;
  }
  assert.equal(t.len, len, 'the visible length');
  assert.equal(findNonJson(t, 'text'), undefined, 'a text is JSON data');
  return textToString(t);
}

/**
 * The left-origin tree holds: everything between a character and its left origin was typed
 * after that origin (its own left origin is the origin or one of those between).
 */
function checkTree(t: Text): void {
  const ids: string[] = [];
  const left: (string | null)[] = [];
  for (const ch of compactText(t).chunks)
    for (const r of ch.runs) {
      const l = textRunLeft(r);
      for (let i = 0; i < textRunSize(r); i++) {
        ids.push(`${r[0]}:${r[1] + i}`);
        left.push(i > 0 ? `${r[0]}:${r[1] + i - 1}` : l && `${l[0]}:${l[1]}`);
      }
    }
  const at = new Map(ids.map((id, i) => [id, i]));
  for (let i = 0; i < ids.length; i++) {
    const j = left[i] === null ? -1 : at.get(left[i]!)!;
    assert.ok(j < i, `${ids[i]}'s left origin comes after it`);
    for (let m = j + 1; m < i; m++)
      assert.ok((left[m] === null ? -1 : at.get(left[m]!)!) >= j, `${ids[m]} lies between ${ids[i]} and its left origin: interleaved`);
  }
}

/** A stand-in for the engine: applies ops in a total order, each a client's. */
function run(state: S, client: string, name: string, args: unknown, position: number): S {
  const r = applyOp(machine, state, { client, seq: position, name, args, author: client }, position);
  assert.equal(r.error, undefined, `${name} failed: ${r.error}`);
  return r.state;
}

test('createText, insert and delete by index on one replica', () => {
  let s = machine.initial;
  assert.equal(textToString(s.doc), 'hello');
  s = run(s, 'a', 'textInsert', insertArgs(s.doc, 'doc', 'a', 5, ' world'), 1);
  s = run(s, 'a', 'textInsert', insertArgs(s.doc, 'doc', 'a', 0, '>'), 2);
  assert.equal(checkShape(s.doc), '>hello world');
  s = run(s, 'a', 'textDelete', deleteArgs(s.doc, 'doc', 1, 6), 3);
  assert.equal(checkShape(s.doc), '>world');
  const note = ['notes', 'a'] as const;
  s = run(s, 'b', 'textInsert', insertArgs(textAt(s, note), note, 'b', 0, 'in a keyed map'), 4);
  assert.equal(textToString(textAt(s, note)), 'in a keyed map');
  // Plain JSON: it survives msgpack (the stored and sent form).
  assert.deepEqual(decode(encode(s)), JSON.parse(JSON.stringify(s)));
});

test('bad input is a bad-argument error and the op has no effect', () => {
  const s = machine.initial;
  assert.throws(() => insertArgs(s.doc, 'doc', 'a', 6, 'x'), HerculesError);
  assert.throws(() => deleteArgs(s.doc, 'doc', 3, 3), HerculesError);
  assert.throws(
    () => textAt(s, 'nope'),
    (e: HerculesError) => e.code === 'bad-argument',
  );
  const inv = (args: unknown): OpInvocation => ({ client: 'a', seq: 1, name: 'textInsert', args, author: 'a' });
  for (const args of [
    null,
    { p: 'doc', l: null, r: null, k: 0, t: '' },
    { p: 'doc', l: ['x', 9, 0], r: null, k: 0, t: 'y' },
    { p: 'nope', l: null, r: null, k: 0, t: 'y' },
  ]) {
    const r = applyOp(machine, s, inv(args), 1);
    assert.ok(r.error, `refused: ${JSON.stringify(args)}`);
    assert.equal(r.state, s);
  }
  // A clock below the client's next is refused: ids are never reused.
  const s1 = run(s, 'a', 'textInsert', { p: 'doc', l: null, r: null, k: 0, t: 'ab' }, 1);
  assert.ok(applyOp(machine, s1, inv({ p: 'doc', l: null, r: null, k: 1, t: 'c' }), 2).error);
});

// spec: TEXT-INTACT
// spec: TEXT-LAYOUT
test('a text past 32 chunks grows a deeper tree: its counts, depth and text hold after every edit', () => {
  let s = machine.initial;
  let model = 'hello';
  let seed = 11;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return Math.floor((seed / 2147483648) * n);
  };
  for (let i = 1; i <= 4000; i++) {
    const who = ['a', 'b', 'c'][rand(3)];
    if (rand(5) > 0 || model.length < 2) {
      const at = rand(model.length + 1);
      const str = 'xyz'.slice(rand(2), 3);
      s = run(s, who, 'textInsert', insertArgs(s.doc, 'doc', who, at, str), i);
      model = model.slice(0, at) + str + model.slice(at);
    } else {
      const at = rand(model.length - 1);
      const n = 1 + rand(2);
      s = run(s, who, 'textDelete', deleteArgs(s.doc, 'doc', at, n, who), i);
      model = model.slice(0, at) + model.slice(at + n);
    }
    if (i % 500 === 0) assert.equal(checkShape(s.doc), model, `after ${i} edits`);
  }
  assert.equal(checkShape(s.doc), model);
  assert.ok(
    s.doc.root.kids.every((k) => 'kids' in k),
    'the root holds branches: the tree grew a level',
  );
  for (let i = 0; i <= s.doc.len; i += 97) assert.equal(textPlaceIndex(s.doc, textPlaceAt(s.doc, i)), i, `place at ${i}`);
});

test('sequential random edits match a string (one replica, many chunks)', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.boolean(), fc.nat(), fc.nat(), fc.string({ minLength: 1, maxLength: 4 })), { minLength: 100, maxLength: 400 }),
      (edits) => {
        let s = machine.initial;
        let model = 'hello';
        edits.forEach(([ins, a, b, str], i) => {
          if (ins || model.length === 0) {
            const at = a % (model.length + 1);
            s = run(s, 'a', 'textInsert', insertArgs(s.doc, 'doc', 'a', at, str), i + 1);
            model = model.slice(0, at) + str + model.slice(at);
          } else {
            const at = a % model.length;
            const n = 1 + (b % Math.min(5, model.length - at));
            s = run(s, 'a', 'textDelete', deleteArgs(s.doc, 'doc', at, n), i + 1);
            model = model.slice(0, at) + model.slice(at + n);
          }
        });
        assert.equal(checkShape(s.doc), model);
      },
    ),
    { numRuns: 60 },
  );
});

/**
 * Several clients edit concurrently: each computes its ops' anchors on what it has seen (the
 * log's prefix up to `seen`, then its own ops not in that prefix), the server orders the ops.
 */
interface Client {
  id: string;
  seen: number;
  /** Its ops, with their log position once ordered. */
  mine: { name: string; args: unknown; pos?: number }[];
}
function fold(log: readonly { client: string; name: string; args: unknown }[], n: number): S {
  let s = machine.initial;
  for (let i = 0; i < n; i++) s = run(s, log[i].client, log[i].name, log[i].args, i + 1);
  return s;
}
function viewOf(c: Client, log: readonly { client: string; name: string; args: unknown }[]): S {
  let s = fold(log, c.seen);
  for (const op of c.mine) if (op.pos === undefined || op.pos >= c.seen) s = run(s, c.id, op.name, op.args, 0);
  return s;
}

/** The server orders every op of `c` it has not ordered yet. */
function orderAll(c: Client, log: { client: string; name: string; args: unknown }[]): void {
  for (const op of c.mine) {
    if (op.pos !== undefined) continue;
    log.push({ client: c.id, name: op.name, args: op.args });
    op.pos = log.length - 1;
  }
}

type Action = { kind: 'insert' | 'delete' | 'order' | 'sync'; who: number; a: number; b: number; word: string };
const actionArb = fc.record({
  kind: fc.constantFrom('insert', 'insert', 'delete', 'order', 'order', 'sync') as fc.Arbitrary<Action['kind']>,
  who: fc.nat(3),
  a: fc.nat(),
  b: fc.nat(),
  word: fc.string({ minLength: 1, maxLength: 3 }),
});

// spec: TEXT-CONVERGE, TEXT-INTACT
test('concurrent edits from several clients converge with nothing lost or duplicated (TEXT-CONVERGE, TEXT-INTACT)', () => {
  fc.assert(
    fc.property(fc.array(actionArb, { minLength: 10, maxLength: 80 }), (actions) => {
      const log: { client: string; name: string; args: unknown }[] = [];
      const clients: Client[] = ['c0', 'c1', 'c2', 'c3'].map((id) => ({ id, seen: 0, mine: [] }));
      const inserted = new Map<string, string>(); // id -> character
      for (const act of actions) {
        const c = clients[act.who];
        if (act.kind === 'order') {
          const op = c.mine.find((o) => o.pos === undefined);
          if (op) {
            log.push({ client: c.id, name: op.name, args: op.args });
            op.pos = log.length - 1;
          }
          continue;
        }
        if (act.kind === 'sync') {
          c.seen = log.length;
          continue;
        }
        const t = viewOf(c, log).doc;
        if (act.kind === 'insert') {
          const args = insertArgs(t, 'doc', c.id, act.a % (t.len + 1), act.word);
          for (let i = 0; i < act.word.length; i++) inserted.set(`${c.id}:${args.k + i}`, act.word[i]);
          c.mine.push({ name: 'textInsert', args });
        } else if (t.len > 0) {
          const at = act.a % t.len;
          c.mine.push({ name: 'textDelete', args: deleteArgs(t, 'doc', at, 1 + (act.b % Math.min(4, t.len - at))) });
        }
      }
      for (const c of clients) orderAll(c, log);
      const final = fold(log, log.length).doc;
      const text = checkShape(final);
      checkTree(final);
      // Every replica that has seen the whole log shows the same text, whatever it had seen before.
      for (const c of clients) assert.equal(textToString(viewOf({ ...c, seen: log.length, mine: [] }, log).doc), text);
      // Every inserted character is held exactly once (checkShape), as itself.
      let held = 0;
      for (const ch of compactText(final).chunks)
        for (const r of ch.runs) {
          const n = textRunSize(r);
          const s = textRunText(r);
          held += n;
          if (s !== undefined) for (let i = 0; i < n; i++) if (r[0] !== 0) assert.equal(s[i], inserted.get(`${final.clients[r[0]]}:${r[1] + i}`));
        }
      assert.equal(held, inserted.size + 'hello'.length);
    }),
    { numRuns: 150 },
  );
});

// spec: TEXT-NO-INTERLEAVE
test('an insert at the start goes after all that was typed after the start, however it was split (TEXT-NO-INTERLEAVE)', () => {
  // a and b typed at the start, X typed between them; Q typed at the start by one who saw none of it.
  let s = machine.initial;
  const base = s.doc;
  s = run(s, 'a', 'textInsert', insertArgs(s.doc, 'doc', 'a', 0, 'ab'), 1);
  s = run(s, 'a', 'textInsert', insertArgs(s.doc, 'doc', 'a', 1, 'X'), 2);
  s = run(s, 'b', 'textInsert', insertArgs(base, 'doc', 'b', 0, 'Q'), 3);
  assert.equal(textToString(s.doc), 'aXbQhello');
  checkTree(s.doc);
});

// spec: TEXT-NO-INTERLEAVE
test('concurrent typing at one place never interleaves, forwards or backwards (TEXT-NO-INTERLEAVE)', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.nat(2), fc.boolean()), { minLength: 1, maxLength: 40 }),
      fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
      fc.nat(5),
      (turns, backwards, at) => {
        // Three clients type a word each, char by char, at the same index of a text none of them
        // has seen the others' typing in; the order interleaves their keystrokes.
        const words = ['abcdefgh', 'ABCDEFGH', '01234567'];
        const log: { client: string; name: string; args: unknown }[] = [];
        const clients: Client[] = ['x', 'y', 'z'].map((id) => ({ id, seen: 0, mine: [] }));
        const typed = [0, 0, 0];
        for (const [who, order] of turns) {
          const c = clients[who];
          if (typed[who] < words[who].length) {
            const t = viewOf(c, log).doc;
            const n = typed[who]++;
            // Forwards: after what it typed; backwards: each char before the previous one.
            const index = backwards[who] ? at : at + n;
            const ch = backwards[who] ? words[who][words[who].length - 1 - n] : words[who][n];
            c.mine.push({ name: 'textInsert', args: insertArgs(t, 'doc', c.id, index, ch) });
          }
          if (order) orderAll(c, log);
        }
        for (const c of clients) orderAll(c, log);
        const text = textToString(fold(log, log.length).doc);
        words.forEach((w, i) => {
          const part = backwards[i] ? w.slice(w.length - typed[i]) : w.slice(0, typed[i]);
          assert.ok(text.includes(part), `${JSON.stringify(part)} is not contiguous in ${JSON.stringify(text)}`);
        });
      },
    ),
    { numRuns: 300 },
  );
});

// spec: TEXT-CONVERGE
test('room.text: two clients type at one place while apart; both end with the same text, each word whole', async () => {
  const notes = defineMachine({
    name: 'text-room-test',
    version: 1,
    initial: { notes: { n1: createText('[]') } as Record<string, Text> },
    ops: { ...textOps() },
  });
  const net = new Loopback(notes);
  const a = net.client('alice');
  const b = net.client('bob');
  net.connect('alice');
  net.connect('bob');
  await net.settle();
  const ta = a.text(['notes', 'n1']);
  const tb = b.text(['notes', 'n1']);
  // Neither hears of the other's typing until the end: each types its word inside the brackets.
  for (const ch of 'hello') ta.insert(ta.length() - 1, ch);
  for (const ch of 'world') tb.insert(tb.length() - 1, ch);
  assert.equal(ta.toString(), '[hello]');
  assert.equal(tb.toString(), '[world]');
  assert.equal(ta.toString('authoritative'), '[]');
  await net.settle();
  const text = ta.toString('authoritative');
  assert.equal(tb.toString('authoritative'), text);
  assert.equal(ta.toString(), text);
  assert.ok(text === '[helloworld]' || text === '[worldhello]', text);
  tb.delete(1, 5);
  await net.settle();
  assert.equal(ta.toString('visible'), tb.toString('visible'));
  assert.equal(ta.toString('visible').length, 7);
});

test('a place from an index and back gives the index, at every index of a text edited by two clients; isTextPlace checks the form', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ who: fc.constantFrom('a', 'b'), at: fc.nat(), del: fc.nat(3), s: fc.string({ maxLength: 4 }) }), { maxLength: 30 }),
      (edits) => {
        let s = machine.initial;
        let pos = 0;
        for (const e of edits) {
          const at = e.at % (s.doc.len + 1);
          const n = Math.min(e.del, s.doc.len - at);
          if (n > 0) s = run(s, e.who, 'textDelete', deleteArgs(s.doc, 'doc', at, n), ++pos);
          if (e.s.length > 0) s = run(s, e.who, 'textInsert', insertArgs(s.doc, 'doc', e.who, at, e.s), ++pos);
        }
        for (let i = 0; i <= s.doc.len; i++) {
          const place = textPlaceAt(s.doc, i);
          assert.ok(isTextPlace(place));
          assert.equal(textPlaceIndex(s.doc, place), i);
        }
      },
    ),
    { numRuns: 200 },
  );
  for (const bad of [undefined, 'a', ['a'], ['a', 1.5], [1, 2], ['a', 1, 2]]) assert.equal(isTextPlace(bad), false, JSON.stringify(bad));
});
