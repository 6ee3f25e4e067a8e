#include "daemon/store/statement_rows.h"

namespace xv::store {

Status SelectOneByIdOrName(SqliteConnection* conn, const std::string& select,
                           const std::string& id_column, const std::string& name_column,
                           const std::string& what, int64_t id, const std::string& name,
                           SqliteStatement* st) {
  if (id != 0) {
    XV_RETURN_IF_ERROR(conn->Prepare(select + "WHERE " + id_column + " = ?", st));
    st->Bind(1, id);
  } else {
    XV_RETURN_IF_ERROR(conn->Prepare(
        select + "WHERE " + name_column + " = ? ORDER BY " + id_column + " DESC LIMIT 1", st));
    st->Bind(1, name);
  }
  bool row = false;
  XV_RETURN_IF_ERROR(st->Step(&row));
  if (row) return Status::Ok();
  return Status::NotFound(id != 0 ? what + " id " + std::to_string(id) + ": no such " + what
                                  : what + " '" + name + "': no such " + what);
}

Status LookupCampaignId(SqliteConnection* c, int64_t id, const std::string& name, int64_t* out) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      SelectOneByIdOrName(c, "SELECT id FROM campaigns ", "id", "name", "campaign", id, name, &st));
  *out = st.ColumnInt(0);
  return Status::Ok();
}

}  // namespace xv::store
