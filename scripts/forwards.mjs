// The one exception to the length bound: a file of forwards only (the client: one line per public
// call, each forwarding to its module) grows with the public surface, not with logic, so splitting
// it would only scatter one list over several files. Such a file may reach FORWARDS_MAX_LINES.
//
// The rule, checked on the file's syntax: every top-level statement is an import, an export list,
// a type or interface, a function or arrow of one statement, a variable without a value, or a class
// whose members are fields, a constructor of assignments only, and methods, accessors and static
// blocks of one statement each. Anything with logic (a branch, a loop, two steps) breaks the rule,
// and the file is held to the ordinary bound.
import ts from 'typescript';

/** Longest a file of forwards only may be. */
export const FORWARDS_MAX_LINES = 800;

const oneStatement = (body) => body !== undefined && body.statements.length === 1;

function isForwardingFunction(node) {
  if (ts.isArrowFunction(node)) return !ts.isBlock(node.body) || oneStatement(node.body);
  return oneStatement(node.body);
}

function isForwardingMember(member) {
  if (ts.isPropertyDeclaration(member)) return member.initializer === undefined;
  if (ts.isConstructorDeclaration(member)) {
    return member.body.statements.every(
      (s) =>
        ts.isExpressionStatement(s) &&
        ts.isBinaryExpression(s.expression) &&
        s.expression.operatorToken.kind === ts.SyntaxKind.EqualsToken,
    );
  }
  if (ts.isMethodDeclaration(member)) return member.body === undefined || oneStatement(member.body);
  if (ts.isGetAccessorDeclaration(member)) return oneStatement(member.body);
  if (ts.isClassStaticBlockDeclaration(member)) return oneStatement(member.body);
  return false;
}

function isForwardingStatement(node) {
  if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) return true;
  if (ts.isTypeAliasDeclaration(node) || ts.isInterfaceDeclaration(node)) return true;
  if (ts.isFunctionDeclaration(node)) return isForwardingFunction(node);
  if (ts.isClassDeclaration(node))
    return node.heritageClauses === undefined && node.members.every(isForwardingMember);
  if (ts.isVariableStatement(node)) {
    return node.declarationList.declarations.every(
      (d) =>
        d.initializer === undefined ||
        (ts.isArrowFunction(d.initializer) && isForwardingFunction(d.initializer)),
    );
  }
  return false;
}

/** True when `text` (the source of `fileName`) is a file of forwards only, by the rule above. */
export function isForwardsOnly(text, fileName) {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  return file.statements.every(isForwardingStatement);
}
