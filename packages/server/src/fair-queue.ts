/**
 * Round robin over groups, then over the members of each group: the order in which the server
 * hands out slices of work. Groups are rooms and members their connections, so a room with many
 * busy connections gets one turn per round like a room with one: a flooding room cannot starve
 * the others, and within a room a flooding connection cannot starve its neighbours.
 *
 * Pure bookkeeping (no timers, no clock): the server decides how much work a turn may do.
 */
export class FairQueue<G, M> {
  /** Groups with waiting members, in turn order. */
  private readonly ring: G[] = [];
  private head = 0;
  /** Each waiting group's members, in turn order (a Set keeps insertion order and makes `add` idempotent). */
  private readonly waiting = new Map<G, Set<M>>();
  private count = 0;

  /** Members waiting, over all groups. */
  get size(): number {
    return this.count;
  }

  /** Groups with members waiting. */
  get groups(): number {
    return this.waiting.size;
  }

  /** Queue `member` of `group` for a turn; a member already waiting keeps its place. */
  add(group: G, member: M): void {
    let members = this.waiting.get(group);
    if (!members) {
      this.waiting.set(group, (members = new Set()));
      this.ring.push(group);
    }
    if (!members.has(member)) {
      members.add(member);
      this.count++;
    }
  }

  /** The next member to get a turn, removed from the queue (`add` it again if it has more to do). */
  take(): { group: G; member: M } | undefined {
    while (this.head < this.ring.length) {
      const group = this.ring[this.head++];
      const members = this.waiting.get(group)!;
      const member = members.values().next().value as M;
      members.delete(member);
      this.count--;
      if (members.size > 0) this.ring.push(group);
      else this.waiting.delete(group);
      // Reclaim the consumed front of the ring now and then, so it does not grow without bound.
      if (this.head > 1024 && this.head * 2 > this.ring.length) {
        this.ring.splice(0, this.head);
        this.head = 0;
      }
      return { group, member };
    }
    return undefined;
  }

  /** Forget `member` (its connection closed). */
  delete(group: G, member: M): void {
    const members = this.waiting.get(group);
    if (!members?.delete(member)) return;
    this.count--;
    if (members.size > 0) return;
    this.waiting.delete(group);
    const i = this.ring.indexOf(group, this.head);
    if (i >= 0) this.ring.splice(i, 1);
  }
}
