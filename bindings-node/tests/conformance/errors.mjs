// Area `errors` through the public errorClass / errorTable, and the package's exception
// classes themselves: every class of the table is an exported class of that name whose
// parent is the table's parent.
import * as srp from 'stapel-runner-protocol';
import { same, steps } from './common.mjs';

export function run(vector) {
  for (const [i, input, expect] of steps(vector)) {
    if (input.class_of !== undefined) {
      const { kind, code } = input.class_of;
      same(i, 'class', srp.errorClass(kind, code), expect.class);
    } else if (input.classes !== undefined) {
      const classes = srp.errorTable().classes.map((c) => ({ name: c.name, parent: c.parent }));
      same(i, 'classes', classes, expect.classes);
      // The package's classes are the table's (the generated ts/errors.ts).
      const exported = expect.classes.map((c) => {
        const cls = srp[c.name];
        if (typeof cls !== 'function') return { name: c.name, parent: 'not exported' };
        const parent = Object.getPrototypeOf(cls);
        return { name: cls.name, parent: parent === Error ? null : parent.name };
      });
      same(i, 'exported classes', exported, expect.classes);
    } else {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
  }
}
