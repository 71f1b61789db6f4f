// The room table: which files of `src/` form each room and which rooms each may import. It is read
// from docs/architecture.md (the section headed "## The room table"), so the table a reader sees is
// the one `npm run lint` enforces: change the table and the code together.
//
// Each row is `| room | files | may import |`: the room's name in backticks; its files as
// backticked paths under src/ (`storage/` a folder, `client.ts` one file; the longest path that
// matches a file decides its room); the rooms it may import, in backticks (`—` for none). Every
// room may import its own files and the room named `leaves`.

const HEADING = '## The room table';

/** Parses the room table out of `markdown`; `source` names the file in errors. */
export function readRoomTable(markdown, source) {
  const start = markdown.indexOf(`\n${HEADING}\n`);
  if (start < 0) throw new Error(`${source}: no "${HEADING}" section`);
  const rest = markdown.slice(start + HEADING.length + 2);
  const end = rest.search(/\n## /);
  const section = end < 0 ? rest : rest.slice(0, end);
  const rooms = [];
  for (const line of section.split('\n')) {
    if (!line.startsWith('|') || /^\|\s*(Room|-)/.test(line)) continue;
    const cells = line.split('|').slice(1, -1);
    if (cells.length !== 3) throw new Error(`${source}: a room table row needs 3 cells: ${line}`);
    const [name, paths, mayImport] = cells.map((cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]));
    if (name.length !== 1 || paths.length === 0)
      throw new Error(`${source}: a room needs one name and files: ${line}`);
    rooms.push({ name: name[0], paths, mayImport: new Set([...mayImport, 'leaves']) });
  }
  const names = new Set(rooms.map((room) => room.name));
  for (const room of rooms) {
    for (const other of room.mayImport) {
      if (!names.has(other))
        throw new Error(`${source}: room ${room.name} may import an unknown room ${other}`);
    }
  }
  return { rooms, source };
}

/** The room of `file` (a path under src/, `/`-separated): the one whose longest path matches it. */
export function roomOf(table, file) {
  const path = file.split('\\').join('/');
  let best = null;
  let bestLength = -1;
  for (const room of table.rooms) {
    for (const p of room.paths) {
      const matches = p.endsWith('/') ? path.startsWith(p) : path === p;
      if (matches && p.length > bestLength) {
        best = room;
        bestLength = p.length;
      }
    }
  }
  return best;
}
