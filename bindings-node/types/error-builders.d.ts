import * as E from './errors';
/** An error as the native layer throws it: the class the core's table names, and its fields. */
export interface Carried {
    class: string;
    code: string;
    message: string;
    detail_code?: string | null;
    details?: Record<string, unknown>;
    field?: string;
    key?: string;
    line_number?: number | null;
    lines?: string[];
    model?: string;
    reasons?: string[];
    status?: number | null;
    violations?: E.Violation[];
}
/** The class of every name of the table, built from a carried error. */
export declare const BUILDERS: Readonly<Record<string, (c: Carried) => E.RunnerProtocolError>>;
