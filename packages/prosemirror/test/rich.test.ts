/**
 * @hercules/prosemirror, the state and the mapping (no view): a document reads flat and back
 * unchanged; a ProseMirror edit becomes ops that reproduce it exactly on the state; two clients'
 * concurrent edits, each made on its own copy and then ordered by a server one after the other,
 * apply in either order, read back as a valid document, and keep what each did (RICH-BLOCK,
 * RICH-MARK, TEXT-NO-INTERLEAVE); bad arguments get a clear error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { EditorState, TextSelection, type Transaction } from 'prosemirror-state';
import { setBlockType, toggleMark } from 'prosemirror-commands';
import { wrapInList } from 'prosemirror-schema-list';
import { applyOp, compactText, defineMachine, HerculesError, textOps, textRunSize, textRunText, type TextRun } from '@hercules/core';
import { docToFlat, flatToDoc, sameFlat } from '../src/convert.ts';
import { flatOf } from '../src/flat.ts';
import { changedRange, submitChanges } from '../src/ops.ts';
import { createRichText, richTextOps, type RichText } from '../src/rich.ts';
import { schema } from '../src/schema.ts';
import { localWindow } from '../src/window.ts';

const machine = defineMachine({ name: 'pm-rich', version: 1, initial: { doc: createRichText() }, ops: { ...textOps(), ...richTextOps() } });
type S = typeof machine.initial;
type Op = { client: string; name: string; args: unknown };
let position = 0;

function run(s: S, op: Op): S {
  const r = applyOp(machine, s, { client: op.client, seq: ++position, name: op.name, args: op.args, author: op.client }, position);
  if (r.error !== undefined) throw new Error(`${op.name} failed: ${r.error}`);
  return r.state;
}

/** A client: its own copy of the state, the ops it submitted, and an editor state mirroring it. */
class Client {
  ops: Op[] = [];
  editor: EditorState;
  constructor(
    readonly clientId: string,
    public state: S,
  ) {
    this.editor = EditorState.create({ doc: flatToDoc(schema, flatOf(state.doc)), schema });
  }
  submit(name: string, args: unknown): void {
    const op = { client: this.clientId, name, args };
    this.ops.push(op);
    this.state = run(this.state, op);
  }
  /** An edit as the binding sends it; the state must then read as the editor's document. */
  edit(make: (s: EditorState) => Transaction | null): void {
    const tr = make(this.editor);
    if (tr === null || !tr.docChanged) return;
    const mirror = this.state.doc;
    submitChanges(this, 'doc', mirror, localWindow(this.editor.doc, tr.doc, mirror), tr.doc, changedRange(this.editor.doc, tr.doc, [tr]), () => this.state.doc);
    this.editor = this.editor.apply(tr);
    assert.ok(sameFlat(flatOf(this.state.doc), docToFlat(this.editor.doc)), 'the ops reproduce the edit');
  }
}

const cmd = (c: (s: EditorState, d: (tr: Transaction) => void) => boolean) => (s: EditorState) => {
  let out: Transaction | null = null;
  c(s, (tr) => (out = tr));
  return out;
};
const select = (s: EditorState, from: number, to: number) => s.apply(s.tr.setSelection(TextSelection.create(s.doc, from, to)));
/** A text position of `s`, from a random number: inside a textblock. */
function textPos(s: EditorState, n: number): number {
  const spots: number[] = [];
  s.doc.descendants((node, pos) => {
    if (node.isTextblock) for (let i = 0; i <= node.content.size; i++) spots.push(pos + 1 + i);
    return !node.isTextblock;
  });
  return spots[n % spots.length];
}

const edit = fc.oneof(
  fc.record({ kind: fc.constant('type' as const), at: fc.nat(), s: fc.constantFrom('a', 'xy', 'hello ', 'ZZ') }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ kind: fc.constant('split' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('mark' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 6 }), m: fc.constantFrom('strong', 'em') }),
  fc.record({ kind: fc.constant('block' as const), at: fc.nat(), b: fc.constantFrom('h1', 'h2', 'p', 'ul', 'ol') }),
);
type Edit = typeof edit extends fc.Arbitrary<infer T> ? T : never;

function apply(c: Client, e: Edit): void {
  c.edit((s) => {
    const at = textPos(s, e.at);
    if (e.kind === 'type') return s.tr.insertText(e.s, at);
    if (e.kind === 'split') return s.tr.split(at);
    if (e.kind === 'delete') {
      const to = Math.min(at + e.n, s.doc.content.size);
      try {
        return s.tr.delete(at, to);
      } catch {
        return null;
      }
    }
    if (e.kind === 'mark') return cmd(toggleMark(schema.marks[e.m]))(select(s, at, textPos(s, e.at + e.n)));
    const sel = select(s, at, at);
    if (e.b === 'ul' || e.b === 'ol') return cmd(wrapInList(schema.nodes[e.b === 'ul' ? 'bullet_list' : 'ordered_list']))(sel);
    if (e.b === 'p') return cmd(setBlockType(schema.nodes.paragraph))(sel);
    return cmd(setBlockType(schema.nodes.heading, { level: e.b === 'h1' ? 1 : 2 }))(sel);
  });
}

/** A start: two paragraphs, a heading, a list, marks. */
/** The ops that made `start()`'s state (the reference reads every op ever applied). */
let startOps: Op[] = [];
function start(): S {
  const c = new Client('init', machine.initial);
  c.edit((s) => s.tr.insertText('Title first line', 1));
  c.edit((s) => s.tr.split(6));
  c.edit(cmd(setBlockType(schema.nodes.heading, { level: 1 })));
  c.edit((s) => s.tr.split(s.doc.content.size - 1).insertText('item one', s.doc.content.size + 1));
  c.edit((s) => cmd(wrapInList(schema.nodes.bullet_list))(select(s, s.doc.content.size - 3, s.doc.content.size - 3)));
  c.edit((s) => cmd(toggleMark(schema.marks.strong))(select(s, 8, 13)));
  startOps = c.ops;
  return c.state;
}

test('a document reads flat and back unchanged: headings, nested lists, items of several blocks, marks, links', () => {
  const { nodes: n, marks: m } = schema;
  const p = (...c: ReturnType<typeof schema.text>[]) => n.paragraph.create(null, c);
  const item = (...c: ReturnType<typeof p>[]) => n.list_item.create(null, c);
  const doc = n.doc.create(null, [
    n.heading.create({ level: 2 }, [schema.text('Head')]),
    p(schema.text('plain '), schema.text('bold', [m.strong.create()]), schema.text(' link', [m.link.create({ href: 'https://x.test' }), m.em.create()])),
    n.bullet_list.create(null, [
      item(p(schema.text('one')), p(schema.text('one, more'))),
      item(p(schema.text('two')), n.ordered_list.create(null, [item(p(schema.text('2a')))]), p(schema.text('two, after'))),
    ]),
    p(),
  ]);
  const flat = docToFlat(doc);
  assert.equal(flat.text, '\nHead\nplain bold link\none\none, more\ntwo\n2a\ntwo, after\n');
  assert.deepEqual(flat.blocks, [{ h: 2 }, {}, { l: 'b' }, { l: 'b', c: true }, { l: 'b' }, { l: 'bo' }, { l: 'b', c: true }, {}]);
  const back = flatToDoc(schema, flat);
  assert.ok(back.eq(doc), back.toString());
});

test('each kind of edit becomes ops that reproduce it on the state, and the state reads back as the document', () => {
  fc.assert(
    fc.property(fc.array(edit, { minLength: 1, maxLength: 12 }), (edits) => {
      const c = new Client('ada', start());
      for (const e of edits) apply(c, e);
      const doc = flatToDoc(schema, flatOf(c.state.doc));
      doc.check();
      assert.ok(sameFlat(docToFlat(doc), flatOf(c.state.doc)));
    }),
    { numRuns: 150 },
  );
});

/** A run's parts by name. */
const runOf = (r: TextRun) => ({ c: r[0], k: r[1], t: textRunText(r), n: textRunSize(r) });

/** Bold characters of the final state by id. */
function boldIds(rich: RichText): Set<string> {
  const flat = flatOf(rich);
  const ids = new Set<string>();
  let i = 0;
  for (const ch of compactText(rich.text).chunks)
    for (const r of ch.runs.map(runOf)) {
      if (r.t === undefined) continue;
      for (let o = 0; o < r.t.length; o++, i++) if (flat.marks.get('strong')?.[i] === true) ids.add(`${rich.text.clients[r.c]}:${r.k + o}`);
    }
  return ids;
}

// spec: RICH-BLOCK, RICH-MARK
test('concurrent edits by two clients apply in either order, read back as a valid document, and keep both', () => {
  fc.assert(
    fc.property(fc.array(edit, { maxLength: 8 }), fc.array(edit, { maxLength: 8 }), fc.boolean(), (ea, eb, aFirst) => {
      const base = start();
      const [a, b] = [new Client('ada', base), new Client('bob', base)];
      for (const e of ea) apply(a, e);
      for (const e of eb) apply(b, e);
      // The server orders one client's ops after the other's; every op still applies.
      const order = aFirst ? [...a.ops, ...b.ops] : [...b.ops, ...a.ops];
      const final = order.reduce(run, base);
      // The reference: every block op and every span ever ordered, none dropped, read against
      // the final text (RICH-BLOCK: the last op naming a separator; RICH-MARK: the last span
      // around a character). The state, which keeps only spans not covered, reads the same.
      assert.deepEqual(flatOf(final.doc), reference(final.doc, [...startOps, ...order]));
      // Concurrent block changes can leave attributes no document has (a list item's
      // continuation whose list went): the state still reads as a valid document, and that
      // document reads back as itself.
      const doc = flatToDoc(schema, flatOf(final.doc));
      doc.check();
      assert.ok(flatToDoc(schema, docToFlat(doc)).eq(doc), 'the document is stable');
      assert.equal(docToFlat(doc).text, flatOf(final.doc).text);
      // No character lost or duplicated: one is visible when each client that has it shows it;
      // each client's characters keep their order (TEXT-CONVERGE, TEXT-INTACT).
      const [va, vb, vf] = [visible(a.state.doc), visible(b.state.doc), visible(final.doc)];
      const [ka, kb] = [known(a.state.doc), known(b.state.doc)];
      const expected = new Set([...va, ...vb].filter((id) => (!ka.has(id) || va.includes(id)) && (!kb.has(id) || vb.includes(id))));
      assert.deepEqual(new Set(vf), expected);
      assert.equal(vf.length, expected.size, 'no character twice');
      for (const v of [va, vb])
        assert.deepEqual(
          vf.filter((id) => v.includes(id)),
          v.filter((id) => expected.has(id)),
          "a client's characters in its order",
        );
      // Bold set by one client on characters the other neither deleted nor formatted stays bold.
      const last = aFirst ? b : a;
      const first = aFirst ? a : b;
      if (!last.ops.some((op) => op.name === 'richFormat' || op.name === 'textDelete')) {
        const mine = boldIds(first.state.doc);
        const all = boldIds(final.doc);
        for (const id of mine) assert.ok(all.has(id) || !vf.includes(id), `bold ${id} kept`);
      }
    }),
    { numRuns: 150 },
  );
});

/** The flat form from every op of the log, no span dropped: each character's last span, each separator's last block op. */
function reference(rich: RichText, ops: readonly Op[]): ReturnType<typeof flatOf> {
  const full = new Map<string, number>();
  const chars: { id: string; ch: string }[] = [];
  for (const ch of compactText(rich.text).chunks)
    for (const r of ch.runs.map(runOf))
      for (let o = 0; o < r.n; o++) {
        const id = `${rich.text.clients[r.c]}:${r.k + o}`;
        full.set(id, full.size);
        if (r.t !== undefined) chars.push({ id, ch: r.t[o] });
      }
  const text = chars.map((c) => c.ch).join('');
  const blocks = chars
    .filter((c) => c.ch === '\n')
    .map((c) => {
      const last = ops.filter((op) => op.name === 'richBlock' && (op.args as { b: [string, number] }).b.join(':') === c.id).at(-1);
      return (last?.args as { a: object | null } | undefined)?.a ?? {};
    });
  const marks = new Map<string, (true | object | null)[]>();
  for (const op of ops) {
    if (op.name !== 'richFormat') continue;
    const a = op.args as { m: string; v: true | object | null; s: [string, number, number]; e: [string, number, number] };
    const [from, to] = [full.get(`${a.s[0]}:${a.s[1]}`)!, full.get(`${a.e[0]}:${a.e[1]}`)!];
    if (!marks.has(a.m)) marks.set(a.m, new Array(text.length).fill(null));
    chars.forEach((c, i) => {
      const at = full.get(c.id)!;
      if (at >= from && at <= to && c.ch !== '\n') marks.get(a.m)![i] = a.v;
    });
  }
  // A mark whose spans cover no visible character has no entry in the state's reading.
  for (const [m, vals] of marks) if (vals.every((v) => v === null) && !flatOf(rich).marks.has(m)) marks.delete(m);
  return { text, blocks, marks } as ReturnType<typeof flatOf>;
}

/** The visible characters' ids, in order. */
function visible(rich: RichText): string[] {
  const out: string[] = [];
  for (const ch of compactText(rich.text).chunks)
    for (const r of ch.runs.map(runOf)) if (r.t !== undefined) for (let o = 0; o < r.t.length; o++) out.push(`${rich.text.clients[r.c]}:${r.k + o}`);
  return out;
}

/** Every character's id, deleted ones included. */
function known(rich: RichText): Set<string> {
  const out = new Set<string>();
  for (const ch of compactText(rich.text).chunks)
    for (const r of ch.runs.map(runOf)) for (let o = 0; o < r.n; o++) out.add(`${rich.text.clients[r.c]}:${r.k + o}`);
  return out;
}

test('bad arguments get a clear bad-argument error', () => {
  const s = machine.initial;
  const bad = (name: string, args: unknown) => {
    const r = applyOp(machine, s, { client: 'x', seq: ++position, name, args, author: 'x' }, position);
    assert.match(String(r.error), /bad-argument|richBlock|richFormat|expected|must/, `${name} ${JSON.stringify(args)}: ${r.error}`);
  };
  bad('richBlock', null);
  bad('richBlock', { p: 'doc', b: ['', 'x'], a: null });
  bad('richBlock', { p: 'doc', b: ['', 0], a: [1] });
  bad('richBlock', { p: 'nope', b: ['', 0], a: null });
  bad('richBlock', { p: 'doc', b: ['ghost', 0], a: null });
  bad('richFormat', { p: 'doc', m: '', v: true, s: ['', 0, 0], e: ['', 0, 0] });
  bad('richFormat', { p: 'doc', m: 'strong', v: 5, s: ['', 0, 0], e: ['', 0, 0] });
  bad('richFormat', { p: 'doc', m: 'strong', v: true, s: ['', 9, 0], e: ['', 0, 0] });
  assert.ok(new HerculesError('bad-argument', 'x') instanceof Error);
});
