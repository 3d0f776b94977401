# Speed-ups of moto's own bookkeeping, loaded before its server starts: each keeps what
# moto answers and makes a cost that grew with the tables or the queue constant. The test
# kit's moto and `stm local`'s load this file.
#
# moto backs a TransactWriteItems up by deep-copying every table it touches, to restore on
# a cancellation: each commit costs the size of the tables (a fan-out of 1,000 children
# copied the executions table, its 130 KB parent included, 2,000 times). Back up the items
# the transaction names instead and restore those: the same rollback, since a transaction
# writes nothing else (and restoring those items alone leaves what other requests wrote
# meanwhile, which restoring a whole table would undo).
import copy as _copy
import moto.dynamodb.models as _ddb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table as _Table
class _NoTableCopies:
    @staticmethod
    def deepcopy(value, *args, **kwargs):
        return value if isinstance(value, _Table) else _copy.deepcopy(value, *args, **kwargs)
    def __getattr__(self, name):
        return getattr(_copy, name)
_ddb_models.copy = _NoTableCopies()
_transact_write_items = DynamoDBBackend.transact_write_items
def _transact_with_item_backups(self, transact_items):
    from moto.dynamodb.models.dynamo_type import DynamoType
    backups = []
    for action in transact_items:
        for op in action.values():
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            key = op.get("Key") or op.get("Item") or {}
            names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
            if any(name not in key for name in names):
                continue  # refused by moto before anything is written
            parts = tuple(DynamoType(key[name]) for name in names)
            backups.append((table, parts, _copy.deepcopy(table.get_item(*parts))))
    try:
        return _transact_write_items(self, transact_items)
    except Exception:
        for table, parts, old in reversed(backups):
            if len(parts) == 2:
                table.items[parts[0]].pop(parts[1], None)
                if old is not None:
                    table.items[parts[0]][parts[1]] = old
            else:
                table.items.pop(parts[0], None)
                if old is not None:
                    table.items[parts[0]] = old
        raise
DynamoDBBackend.transact_write_items = _transact_with_item_backups

# moto reads the clock through datetime arithmetic (about 10 microseconds a call) and SQS
# asks it for every queued message on every send and receive: a FIFO send took a second
# with 1,000 messages queued. The same epoch milliseconds from time.time().
import time as _time
import moto.sqs.models as _sqs_models
_unix_time_millis = _sqs_models.unix_time_millis
def _fast_unix_time_millis(dt=None):
    return _time.time() * 1000.0 if dt is None else _unix_time_millis(dt)
_sqs_models.unix_time_millis = _fast_unix_time_millis
